"""One module per library under test. Adding a peer is adding one file here.

A peer module has two halves.

``SPEC``, a literal dict that ``run.py`` reads with ``ast.literal_eval``
(the harness never imports a peer: the library is only in the peer's venv):

    name           the module name, as in ``--only``
    venv           optional: share another peer's venv (one library, two worker shapes)
    requirements   pip arguments for the peer's venv ("{repo}" = a snapshot of this repo);
                   the harness adds hiredis (``--hiredis``) and a redis-py pin (``--peer-redis-py``)
    distributions  whose versions to report
    worker         the worker command line; "{bin}" is the venv's bin dir,
                   "{procs}" the process count (2), "{queue_url}" the queue database
    burst          optional: the worker option that makes it exit once the queue is empty
                   (Redis time per job, ``harness/redis_costs.py``; without it the harness
                   waits for the counter)
    copies         how many times to start ``worker`` (default 1; arq has no -w option)
    enqueue_api    the normal one-job API the producer loop calls (for the report)
    bulk           the bulk API (for the report), or None
    no_bulk        why there is none worth measuring, when ``bulk`` is None
    optional       True: left out of --quick unless named in --only

The code, imported by the library's own worker and by ``driver.py``:

    the app / broker / queue objects the worker command line names;
    two tasks, ``noop`` (calls ``_common.record_done()``) and ``stamp``
    (``_common.record_start()``), or their ``a``-prefixed async versions;
    send_noop(), send_stamp()       enqueue one job through the normal API
    send_noop_bulk(n)               optional: n no-op jobs through the bulk API
    open_producer(), close_producer()   optional setup and teardown of the producer side

``send_*`` may be coroutine functions (SAQ, arq): the driver then awaits
them one after the other in one event loop.
"""
