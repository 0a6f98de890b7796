"""The worker: a supervisor process and the child processes that run jobs."""
