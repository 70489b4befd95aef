"""Runs as a report reads them: long-format results files and, per run id, the run folder beside them
(`runs/<run id>/`), its epochs and its config (read through recx.runs.store)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from recx.core.errors import RecxError
from recx.runs import store

IDENTITY = ("seed", "dataset", "device", "kernels", "eval_batch_size")  # config keys that never name a method


def load_results(paths: list[Path], runs_dir: Path | None = None) -> tuple[pd.DataFrame, dict[str, Path]]:
    """The results files stacked, and each run id's folder (under `runs_dir`, else `runs/` beside each file; a run's
    own results file, or evaluated lists', in its own folder)."""
    frames, folders = [], {}
    for path in paths:
        if not path.is_file():
            raise RecxError(f"{path}: no such results file")
        try:
            frame = pd.read_parquet(path)
        except Exception as error:  # pyarrow raises several types for a file that is not Parquet
            raise RecxError(f"{path}: not a results Parquet file ({error})") from None
        missing = {"run_id", "dataset", "split", "metric", "k", "stratum", "value"} - set(frame.columns)
        if missing:
            raise RecxError(f"{path}: not a recx results file (no column {sorted(missing)[0]!r})")
        _check_types(frame, path)
        if "method" not in frame.columns:
            frame = frame.assign(method=frame.loss + "+" + frame.sampler)
        frames.append(frame)
        base = runs_dir or path.parent / "runs"
        folders.update(_folders(path, base, frame.run_id.unique()))
    return pd.concat(frames, ignore_index=True), folders


def _folders(results: Path, base: Path, run_ids) -> dict[str, Path]:
    """Each run's folder: the folder holding `results` when it is one run's own results (a completed run folder,
    or evaluated lists), else `base/<id>`."""
    own = len(run_ids) == 1 and store.state(results.parent) == "complete"
    return {run_id: results.parent if own else base / run_id for run_id in run_ids}


def _check_types(frame: pd.DataFrame, path: Path) -> None:
    """`value` holds numbers and `k` integers (a text column would fail in the middle of the report)."""
    for column, expected, fits in (
        ("value", "numbers", lambda c: pd.api.types.is_numeric_dtype(c) and not pd.api.types.is_bool_dtype(c)),
        ("k", "integers", pd.api.types.is_integer_dtype),
    ):
        if not fits(frame[column]):
            raise RecxError(
                f"{path}: column {column!r} holds {frame[column].dtype} values, expected {expected}; "
                "not a recx results file"
            )


def epochs(folder: Path) -> pd.DataFrame:
    """epochs.jsonl of a run: epoch, loss, seconds and the validation metric; `time` = cumulative seconds."""
    records = pd.DataFrame(store.read_epochs(folder))
    return records.assign(time=records.seconds.cumsum()) if not records.empty else records


def flat_config(folder: Path) -> dict:
    """config.yaml with nested args flattened to dotted keys (sampler_args.m), without the identity keys."""
    flat = {}
    for key, value in store.read_config(folder, required=False).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": item for inner, item in value.items()})
        elif key not in IDENTITY:
            flat[key] = value
    return flat
