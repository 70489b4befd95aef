"""What a report reads: long-format results files and, per run id, the run folder beside them (`runs/<run id>/`:
config.yaml, epochs.jsonl, per_user_<split>.parquet)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd
import yaml

from recx.errors import RecxError

IDENTITY = ("seed", "dataset", "device", "kernels", "eval_batch_size")  # config keys that never name a method


def load_results(paths: list[Path], runs_dir: Path | None = None) -> tuple[pd.DataFrame, dict[str, Path]]:
    """The results files stacked, and each run id's folder (under `runs_dir`, else `runs/` beside each file)."""
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
        if "method" not in frame.columns:
            frame = frame.assign(method=frame.loss + "+" + frame.sampler)
        frames.append(frame)
        base = runs_dir or path.parent / "runs"
        folders.update({run_id: base / run_id for run_id in frame.run_id.unique()})
    return pd.concat(frames, ignore_index=True), folders


def epochs(folder: Path) -> pd.DataFrame:
    """epochs.jsonl of a run: epoch, loss, seconds and the validation metric; `time` = cumulative seconds."""
    path = folder / "epochs.jsonl"
    if not path.is_file():
        return pd.DataFrame()
    records = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    return records.assign(time=records.seconds.cumsum()) if not records.empty else records


def flat_config(folder: Path) -> dict:
    """config.yaml with nested args flattened to dotted keys (sampler_args.m), without the identity keys."""
    path = folder / "config.yaml"
    if not path.is_file():
        return {}
    flat = {}
    for key, value in (yaml.safe_load(path.read_text()) or {}).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": item for inner, item in value.items()})
        elif key not in IDENTITY:
            flat[key] = value
    return flat


def grid_keys(results: pd.DataFrame) -> set[str]:
    """Keys of the sweep's grid (tuned per method, so never the parameter a plot sweeps)."""
    if "grid_point" not in results.columns:
        return set()
    return {key for point in results.grid_point.dropna().unique() for key, _ in ast.literal_eval(point)}
