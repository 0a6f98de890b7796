"""Code written once, awaited; ``scripts/make_sync.py`` writes its sync twin in ``../_sync/`` (checked in CI)."""
