"""Chaos test (issue #5): the delivery promise under injected faults; see test_chaos.py."""
