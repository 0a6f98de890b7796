"""The example app: one Django task and the views that use it."""
