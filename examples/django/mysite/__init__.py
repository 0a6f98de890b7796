"""A minimal Django project whose background tasks run on taskforge."""
