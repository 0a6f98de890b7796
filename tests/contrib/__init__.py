"""Integrations: job headers, OpenTelemetry, Django."""
