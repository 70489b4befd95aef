"""Datasets: raw-format readers, filtering, splitting, Parquet datasets on disk, CSR matrices in memory."""
