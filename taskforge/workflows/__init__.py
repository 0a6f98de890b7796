"""Workflows: chains, groups and chords of tasks, with their state in Redis.

* ``canvas.py``: ``Signature``, ``chain()``, ``group()``, ``chord()`` and ``|``: what users compose;
* ``plan.py``: a composition as numbered steps, each with what it waits for
  and what it receives;
* ``launch.py``: ``delay()``: store the workflow, send its first steps;
* ``delivery.py``: a step's report carried to its workflow, the next steps
  sent, an ended workflow's steps stopped (``aio_delivery.py``: awaited);
* ``reports.py``: workflows on the app's final-transition seam
  (``taskforge/finals.py``): a step that ended tells its workflow at once;
  and what it installs on the worker's seam (``taskforge/workflow_seam.py``);
* ``spec.py``, ``record.py``: a step's spec, typed, and the workflow
  record's field names, declared once;
* ``resume.py``: a dead workflow running again (``WorkflowHandle.retry()``,
  a dead step retried);
* ``handle.py``: ``WorkflowHandle``, ``WorkflowInfo``, ``WorkflowState``.

The worker's side (the courier that batches a busy child's reports, the
reconciler that repairs what a crash left half done) is worker machinery,
in ``taskforge/worker/`` (``courier.py``, ``reconcile.py``); it never imports
this package, and calls what ``reports.py`` installs on its seam.
"""
