"""The side-by-side benchmark harness behind ``benchmarks/run.py`` (issue #6).

Standard library only: the harness runs in any Python >= 3.10 and drives
each library from that library's own virtualenv, so no peer (and no
redis-py) is ever imported here.
"""
