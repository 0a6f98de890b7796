"""Garbage in Redis, bad input at the API, and the size limits: nothing crashes, nothing is lost or stored wrongly."""
