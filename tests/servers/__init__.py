"""Server compatibility: the quirks of each supported Redis and Valkey, and the matrix CI runs."""
