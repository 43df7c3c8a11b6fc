"""Engine: execution on PostgreSQL, the embedded server and the demo lakehouse."""
