"""Integrations with other projects, each behind an extra: ``otel`` (OpenTelemetry), ``django`` (django.tasks).

Nothing here is imported by taskforge itself, so an app that uses neither
pays nothing for them, and a missing extra fails only where it is used.
"""
