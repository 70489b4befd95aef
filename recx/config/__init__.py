"""A run's configuration: its fields and defaults (run_config) and the checks of values (schema)."""
