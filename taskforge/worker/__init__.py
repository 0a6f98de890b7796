"""The worker: a supervisor process and the child processes that run jobs.

Split by responsibility, so each part can be read (and changed) alone:

* ``supervisor.py``: the main loop, signals and shutdown, wiring the parts below;
* ``pool.py``: the children, what each lane runs, timeouts, aborts, respawns;
* ``starter.py``, ``forkserver.py``: how a child comes to be: forked from a pristine fork
  server made before any thread or socket, or spawned;
* ``leases.py``: renewing this worker's claims, reclaiming those of lost workers;
* ``outcomes.py``: recording the jobs of a child that died before it could;
* ``housekeeping.py``: when the periodic Redis work runs, and its failures contained;
* ``registry.py``: what a worker publishes about itself for ``taskforge status``;
* ``messages.py``: what a child tells its supervisor, one frozen class per kind;
* ``child.py``: the loop of a child and its lanes (claim, run, record);
* ``runner.py``: running one claimed job, given a small run context, not the app;
* ``aio_loop.py``, ``aio_feed.py``, ``aio_run.py``: a child's event loop for ``async def`` tasks,
  its claimer, and running one async job (awaited, then recorded by the runner);
* ``options.py``: the settings the CLI parsed.
"""
