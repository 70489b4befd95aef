"""`recx prepare`: read a source, filter, make ids contiguous, split, and write a prepared dataset."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recx.data.formats import FORMATS
from recx.data.raw import RawInteractions
from recx.data.split import parse_ratios, per_user_ratio_split
from recx.data.store import Interactions, sha256_of, write_dataset
from recx.errors import RecxError


@dataclass
class PrepareOptions:
    format: str
    source: Path | None = None
    ratios: str = "80/20"
    seed: int = 0
    min_rating: float | None = None
    synthetic: dict = field(default_factory=dict)


def _source_files(source: Path | None) -> list[dict]:
    if source is None:
        return []
    paths = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    return [{"path": str(p), "sha256": sha256_of(p)} for p in paths]


def _remap(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous ids in ascending order of the original id."""
    originals, codes = np.unique(values, return_inverse=True)
    return originals, codes.astype(np.int64)


def _contiguous(parts: dict[str, RawInteractions]) -> tuple[dict[str, Interactions], np.ndarray, np.ndarray]:
    whole = RawInteractions.concat(list(parts.values()))
    user_ids, users = _remap(whole.user)
    item_ids, items = _remap(whole.item)
    out, offset = {}, 0
    for name, part in parts.items():
        span = slice(offset, offset + len(part))
        out[name] = Interactions(users[span], items[span], part.rating, part.timestamp)
        offset += len(part)
    return out, user_ids, item_ids


def prepare(name: str, options: PrepareOptions, data_root: Path) -> Path:
    reader = FORMATS.get(options.format)
    if options.source is not None and not options.source.exists():
        raise RecxError(f"--source {options.source}: no such file or folder")
    if options.format != "synthetic" and options.source is None:
        raise RecxError(f"the {options.format} format needs --source PATH")
    raw = reader(options.source, seed=options.seed, **options.synthetic)
    card: dict = {"format": options.format, "source_files": _source_files(options.source),
                  "parameters": {"seed": options.seed, "min_rating": options.min_rating}}
    if options.format == "synthetic":
        card["parameters"]["synthetic"] = options.synthetic
    if isinstance(raw, dict):
        parts = raw
        card["parameters"]["split"] = "as given"
    else:
        if options.min_rating is not None:
            if raw.rating is None:
                raise RecxError(f"--min-rating given but {options.source} has no rating column")
            raw = raw.take(np.flatnonzero(raw.rating >= options.min_rating))
        if len(raw) == 0:
            raise RecxError(f"{options.source}: no interactions left after filtering")
        ratios = parse_ratios(options.ratios)
        indices = per_user_ratio_split(raw.user, ratios, options.seed)
        parts = {split: raw.take(idx) for split, idx in indices.items()}
        card["parameters"]["split"] = {"method": "per-user random", "ratios": list(ratios)}
    if sum(len(p) for p in parts.values()) == 0:
        raise RecxError(f"{options.source}: the dataset is empty")
    splits, user_ids, item_ids = _contiguous(parts)
    return write_dataset(Path(data_root), name, splits, user_ids, item_ids, card)
