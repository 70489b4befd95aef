"""Runs as a report reads them: long-format results files and, per run id, the run folder beside them
(`runs/<run id>/`), its epochs and its config (read through recx.runs.store). A results file is a summary of run
folders: `checked_runs` keeps the rows of the runs whose folder is there, complete and intact, and names the others."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from recx.core.errors import RecxError
from recx.models.registry import model_label, own_objective
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
        base = runs_dir or path.parent / "runs"
        folders.update(_folders(path, base, frame.run_id.unique()))
        frames.append(frame if "method" in frame.columns else frame.assign(method=None))
    results = pd.concat(frames, ignore_index=True)
    unnamed = results.method.isna()
    if unnamed.any():
        labels = configuration_labels(results[unnamed], folders)
        results.loc[unnamed, "method"] = results.loc[unnamed, "run_id"].map(labels)
    return results, folders


def _folders(results: Path, base: Path, run_ids) -> dict[str, Path]:
    """Each run's folder: the folder holding `results` when it is one run's own results (a run folder, complete or
    not, or evaluated lists), else `base/<id>`."""
    folder = results.parent
    own = len(run_ids) == 1 and any((folder / name).is_file() for name in ("config.yaml", store.LISTS_FILE))
    return {run_id: folder if own else base / run_id for run_id in run_ids}


@dataclass(frozen=True)
class LeftOut:
    """A run of the results that a report leaves out: its row (dataset, method), seed, and why."""

    dataset: str
    method: str
    run_id: str
    seed: object
    why: str


def _problem(folder: Path | None, split: str) -> str | None:
    """Why a run's folder cannot back its results (None when it can): absent, not complete (no COMPLETE marker), or
    a file the report reads that is missing or changed since recx wrote it (its recorded sha256)."""
    if folder is None or not folder.exists():
        return f"missing (no folder {folder})" if folder is not None else "missing (no run folder known)"
    current = store.state(folder)
    if current != "complete":
        return f"incomplete ({folder} is {current}: no {store.COMPLETE} marker)"
    recorded = store.recorded_checksums(folder)
    if recorded is None:  # written before recx recorded checksums: read unchecked, with store's note
        store.verify(folder, "results.parquet", "")
        return None
    read = ("results.parquet", f"per_user_{split}.parquet", f"topk_{split}.parquet", "catalogue.parquet")
    for name in (name for name in read if name in recorded):
        try:
            store.verify(folder, name, "train or evaluate the run again")
        except RecxError as error:
            return f"damaged ({error})"
    return None


def checked_runs(results: pd.DataFrame, folders: dict[str, Path], split: str) -> tuple[pd.DataFrame, list[LeftOut]]:
    """(the rows of the runs whose folder is there, complete (its COMPLETE marker) and intact (the recorded sha256
    of each file a report reads: results, per-user values, top-K lists, catalogue), the runs left out and why)."""
    problems = {run_id: _problem(folders.get(run_id), split) for run_id in results.run_id.unique()}
    bad = {run_id for run_id, problem in problems.items() if problem is not None}
    firsts = results[results.run_id.isin(bad)].drop_duplicates("run_id")
    left = [
        LeftOut(row.dataset, row.method, row.run_id, getattr(row, "seed", None), str(problems[row.run_id]))
        for row in firsts.itertuples()
    ]
    return results[~results.run_id.isin(bad)], left


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


# A report row is one configuration. A run without a method name (a `recx train` run, not a sweep's) is named by its
# model (its `label`: `wrmf`, `mostpop`), then, when the model trains with a loss, the loss and sampler
# (`mf bpr+uniform`). Runs whose names coincide but whose configurations differ in anything but the identity keys
# (seed, dataset, device, kernels, eval_batch_size) get the differing keys added (`mf bpr+uniform lr=0.01`); a run
# whose configuration cannot be read is never pooled with another (its run id is added). So the runs a row averages
# differ by their seeds only.


def base_label(model: str, loss, sampler) -> str:
    if own_objective(model) or pd.isna(loss):
        return model_label(model)
    return f"{model_label(model)} {loss}+{sampler}" if pd.notna(sampler) else f"{model_label(model)} {loss}"


def configuration_labels(runs: pd.DataFrame, folders: dict[str, Path]) -> dict[str, str]:
    """run id -> report row label, for the runs (columns run_id, model, loss, sampler) of one report."""
    firsts = runs.drop_duplicates("run_id")
    base = {row.run_id: base_label(row.model, row.loss, row.sampler) for row in firsts.itertuples()}
    configs = {run_id: flat_config(folders[run_id]) if run_id in folders else {} for run_id in base}
    labels = {}
    for name in dict.fromkeys(base.values()):
        members = [run_id for run_id, label in base.items() if label == name]
        known = [run_id for run_id in members if configs[run_id]]
        keys = sorted({key for run_id in known for key in configs[run_id]})
        varying = [key for key in keys if len({repr(configs[run_id].get(key)) for run_id in known}) > 1]
        for run_id in members:
            if not configs[run_id] and len(members) > 1:
                labels[run_id] = f"{name} (run {run_id})"
            elif varying:
                shown = ", ".join(f"{key}={configs[run_id].get(key)}" for key in varying)
                labels[run_id] = f"{name} {shown}"
            else:
                labels[run_id] = name
    return labels
