"""`recx prepare`: locate or download a source, read it, keep the positives, split, and write a prepared dataset."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recx.core.errors import RecxError
from recx.core.folders import writable_folder
from recx.core.lock import exclusive
from recx.core.names import check_name
from recx.data.dataset_folder import Interactions, check_target, sha256_of, write_dataset
from recx.data.dedupe import duplicate_rows
from recx.data.download import fetch_dataset
from recx.data.formats.lines import ReadReport
from recx.data.formats.registry import FORMATS
from recx.data.preprocess import positives
from recx.data.presets import dataset_spec, preset
from recx.data.rating_filter import RatingRule
from recx.data.raw import RawInteractions
from recx.data.split import parse_ratios, split_rows

DEFAULTS: dict[str, Any] = {"rating": "all", "kcore": 0, "split": "per-user-random", "ratios": "80/20"}


@dataclass
class PrepareOptions:
    """None means: the preset's value, else DEFAULTS."""

    format: str | None = None
    source: Path | None = None
    ratios: str | None = None
    seed: int = 0
    synthetic: dict = field(default_factory=dict)
    rating: str | None = None
    kcore: int | None = None
    split: str | None = None
    preset: str | None = None
    skip_bad_lines: bool = False
    dataset: str | None = None


def resolve(options: PrepareOptions) -> dict:
    """Effective rating/kcore/split/ratios: explicit options over the preset over DEFAULTS."""
    params: dict[str, Any] = dict(DEFAULTS)
    if options.preset is not None:
        params.update(preset(options.preset))
    explicit = {"rating": options.rating, "kcore": options.kcore, "split": options.split, "ratios": options.ratios}
    params.update({key: value for key, value in explicit.items() if value is not None})
    if int(params["kcore"]) < 0:
        raise RecxError(f"--kcore {params['kcore']}: expected 0 (off) or a positive integer")
    _check_ratio_total(str(params["ratios"]))
    return params


def _check_ratio_total(text: str) -> None:
    """Ratios are percentages summing to 100 or fractions summing to 1 (80/30 is a typo, not a rescaling)."""
    try:
        total = sum(float(part) for part in text.replace(",", "/").split("/") if part.strip())
    except ValueError:
        return  # parse_ratios names the malformed part
    if not (abs(total - 100) < 1e-6 or abs(total - 1) < 1e-9):
        raise RecxError(
            f"--ratios {text!r}: the parts sum to {total:g}; expected percentages summing to 100 "
            "(e.g. 80/10/10) or fractions summing to 1"
        )


def _locate(name: str, options: PrepareOptions) -> tuple[str, Path | None, dict]:
    """(format, source path, download record): a given --source, or the named dataset's download."""
    spec = dataset_spec(options.dataset or name)
    fmt = options.format or (spec or {}).get("format")
    if fmt is None:
        raise RecxError(f"{name!r} is not a known dataset; give --format FORMAT and --source PATH")
    if options.source is not None:
        if not options.source.exists():
            raise RecxError(f"--source {options.source}: no such file or folder")
        return fmt, options.source, {}
    if fmt == "synthetic":
        return fmt, None, {}
    if spec is None or (options.format is not None and options.format != spec["format"]):
        raise RecxError(f"the {fmt} format needs --source PATH")
    if "manual" in spec:
        raise RecxError(f"{options.dataset or name}: {spec['manual']}")
    fetched = fetch_dataset(options.dataset or name, spec)
    return (
        fmt,
        fetched.path,
        {
            "url": fetched.url,
            "archive": str(fetched.archive),
            "sha256": fetched.sha256,
            "sha256_pinned": fetched.pinned,
        },
    )


def _hashed_files(source: Path | None) -> list[dict]:
    """Source files with their sha256, for readers that do not hash while reading."""
    if source is None:
        return []
    paths = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    return [{"path": str(p), "sha256": sha256_of(p)} for p in paths]


def _contiguous(parts: dict[str, RawInteractions]) -> tuple[dict[str, Interactions], np.ndarray, np.ndarray, dict]:
    """Pre-split sources: ids made contiguous in ascending order of the original id, over all splits; a (user, item)
    pair given more than once is kept where it comes first (train, then valid, then test; in a file, its first line).
    Returns the splits, the original ids and the card's `rows` (read, removed_duplicates, kept)."""
    whole = RawInteractions.concat(list(parts.values()))
    user_ids, users = np.unique(whole.user, return_inverse=True)
    item_ids, items = np.unique(whole.item, return_inverse=True)
    dropped = duplicate_rows(users, items, item_ids.size, None)
    kept = np.ones(len(whole), dtype=bool)
    kept[dropped] = False
    out, offset = {}, 0
    for split, part in parts.items():
        span = slice(offset, offset + len(part))
        out[split] = Interactions(users[span], items[span], part.rating, part.timestamp).take(kept[span])
        offset += len(part)
    rows = {"read": len(whole), "removed_duplicates": int(dropped.size), "kept": len(whole) - int(dropped.size)}
    return out, user_ids, item_ids, rows


def refresh(name: str, data_root: Path) -> Path:
    """Record the current sha256 of dataset `name`'s files in its card.json, holding its lock, once its content is
    checked against the card's content hash (files re-saved with other Parquet options); a note names the files."""
    from recx.data import dataset_folder
    from recx.data.dataset import load_dataset

    check_name(name, "dataset name")
    folder = Path(data_root) / name
    if not folder.is_dir():
        raise RecxError(f"no prepared dataset {name!r} under {data_root} (run `recx prepare {name} ...` first)")
    with exclusive(Path(data_root) / f".{name}.lock", f"dataset {name}"):
        dataset_folder._NOTED.add(str(folder))  # the note that offers this refresh is not shown by it
        try:
            load_dataset(Path(data_root), name)
        finally:
            dataset_folder._NOTED.discard(str(folder))
        changed = dataset_folder.refresh_checksums(folder)
    what = f"the checksums of {', '.join(changed)} recorded anew" if changed else "every checksum already matches"
    print(f"note: {folder / 'card.json'}: {what} (the content is the one the card records)", file=sys.stderr)
    return folder


def prepare(name: str, options: PrepareOptions, data_root: Path, force: bool = False) -> Path:
    """Prepare dataset `name` under `data_root`, holding its lock; an existing one is refused unless `force`."""
    check_name(name, "dataset name")
    data_root = writable_folder(Path(data_root), "data root")
    check_target(data_root, name, force)  # a refusal touches nothing, not even a lock file
    with exclusive(data_root / f".{name}.lock", f"dataset {name}"):
        check_target(data_root, name, force)
        return _prepare_locked(name, options, data_root, force)


def _prepare_locked(name: str, options: PrepareOptions, data_root: Path, force: bool) -> Path:
    params = resolve(options)
    fmt, source, download = _locate(name, options)
    reader = FORMATS.get(fmt)
    report = ReadReport()
    raw = reader(source, seed=options.seed, skip_bad_lines=options.skip_bad_lines, report=report, **options.synthetic)
    label = str(source) if source is not None else fmt
    card: dict = {
        "format": fmt,
        "preset": options.preset,
        "source_files": report.files or _hashed_files(source),
        "parameters": {"seed": options.seed},
    }
    if download:
        card["download"] = download
    if fmt == "synthetic":
        card["parameters"]["synthetic"] = options.synthetic
    if isinstance(raw, dict):
        splits, user_ids, item_ids, card["rows"] = _contiguous(raw)
        card["parameters"]["split"] = "as given"
    else:
        rule = RatingRule.parse(params["rating"])
        ratios = parse_ratios(str(params["ratios"]))
        kept = positives(raw, rule, int(params["kcore"]), label)
        del raw
        inter = kept.interactions
        indices = split_rows(params["split"], inter.user, inter.timestamp, ratios, options.seed, label)
        splits = {split: inter.take(index) for split, index in indices.items()}
        user_ids, item_ids = kept.user_ids, kept.item_ids
        card["parameters"].update(
            {
                "rating": rule.describe(),
                "kcore": int(params["kcore"]),
                "split": {"method": params["split"], "ratios": list(ratios)},
                "duplicates": "one interaction per (user, item): the earliest",
            }
        )
        card["rows"] = {"malformed_lines": report.malformed_lines, **kept.rows}
        if report.malformed_examples:
            card["rows"]["malformed_examples"] = report.malformed_examples
    if sum(len(p) for p in splits.values()) == 0:
        raise RecxError(f"{label}: the dataset is empty")
    return write_dataset(data_root, name, splits, user_ids, item_ids, card, force)
