"""Executing a sweep's runs: one run as a task (task.py), the driver loop shared by every backend (drive.py), and
the backends: in this process, local worker processes (local.py), a Ray cluster (ray_backend.py)."""
