"""diagnostics.json of a run folder: the embedding diagnostics of its trained model (recx.eval.diagnostics)."""

from __future__ import annotations

import json
from pathlib import Path

from recx.data.dataset import Dataset
from recx.eval.diagnostics import diagnostics
from recx.runs.store import write_artifact

FILE = "diagnostics.json"


def write_diagnostics(folder: Path, model, dataset: Dataset, ks: list[int], batch_size: int = 1024) -> dict:
    """diagnostics.json in the run folder, for the splits the run is evaluated on."""
    splits = ["valid", "test"] if dataset.valid is not None else ["test"]
    result = diagnostics(model, dataset, splits, ks, batch_size)
    text = json.dumps(result, indent=2, sort_keys=True) + "\n"
    write_artifact(Path(folder), FILE, lambda path: path.write_text(text))
    return result
