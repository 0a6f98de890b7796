"""Workflows end to end: real Redis, real worker processes, and the in-process runs."""
