"""Workflows: chains, groups and chords of tasks, with their state in Redis.

* ``canvas.py``: ``Signature``, ``chain()``, ``group()``, ``chord()`` and ``|``: what users compose;
* ``plan.py``: a composition as numbered steps, each with what it waits for
  and what it receives;
* ``launch.py``: ``delay()``: store the workflow, send its first steps;
* ``delivery.py``: a step's report carried to its workflow, the next steps
  sent, an ended workflow's steps stopped; and the reconciler that repairs
  what a crash left half done;
* ``resume.py``: a dead workflow running again (``WorkflowHandle.retry()``,
  a dead step retried);
* ``handle.py``: ``WorkflowHandle``, ``WorkflowInfo``, ``WorkflowState``.
"""
