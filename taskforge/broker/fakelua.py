"""The queue's Lua in fakeredis (``memory://``, ``taskforge broker``), each script compiled once.

fakeredis runs a script by compiling its whole source again on every
``EVALSHA``: with the shared prelude each of taskforge's scripts is about
35 KB of Lua, and compiling it was about 1.2 ms of the 1.9 ms an enqueue
took on ``memory://``. Its server keeps one Lua runtime and runs every
script through that runtime's ``execute(source)``; here that runtime is
wrapped so each source is compiled once and its chunk run again. Running a
chunk is what ``execute`` does after compiling, so a script sees the same
globals (``KEYS``, ``ARGV``, ``redis``) and raises the same errors.

It reaches into fakeredis (the server's ``_lua_runtime``): a fakeredis that
keeps its runtime elsewhere is left as it is, only slower.
"""

from __future__ import annotations

from typing import Any

# Sources kept compiled per server: taskforge's scripts are about 40; a user's
# own EVALs on memory:// can be anything, so the table starts over when full.
CHUNKS = 256


class CompiledOnce:
    """A fakeredis server's Lua runtime whose ``execute`` runs each source's compiled chunk."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._chunks: dict[Any, Any] = {}

    def execute(self, source: Any, *args: Any) -> Any:
        chunk = self._chunks.get(source)
        if chunk is None:
            try:
                chunk = self._runtime.compile(source)
            except Exception:  # not Lua: fakeredis's own call raises it, worded as fakeredis words it
                return self._runtime.execute(source, *args)
            if len(self._chunks) >= CHUNKS:
                self._chunks.clear()
            self._chunks[source] = chunk
        return chunk(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


def compile_once(server: Any) -> None:
    """Make ``server``'s Lua runtime (fakeredis makes it on the first script) and wrap it."""
    import fakeredis

    fakeredis.FakeRedis(server=server).eval("return 1", 0)
    runtime = getattr(server, "_lua_runtime", None)
    if runtime is not None and not isinstance(runtime, CompiledOnce):
        server._lua_runtime = CompiledOnce(runtime)
