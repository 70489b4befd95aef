"""Run folders: resolved config, per-epoch metrics, results, model weights, and a completion marker written last."""
