"""Base utilities: errors, names, folders and atomic writes, locks, progress, registries, threads, devices."""
