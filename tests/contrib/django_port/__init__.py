"""Django's and django-tasks' backend tests, ported onto ``TaskforgeBackend`` with real workers (see LICENSE)."""
