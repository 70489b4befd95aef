"""Named preparation presets and dataset download specs, from the packaged `presets.yaml`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from recx.core.errors import RecxError

PRESETS_FILE = Path(__file__).with_name("presets.yaml")
PRESET_KEYS = {"rating", "kcore", "split", "ratios"}


@lru_cache(maxsize=1)
def _load() -> dict:
    return yaml.safe_load(PRESETS_FILE.read_text())


def preset(name: str) -> dict:
    """The option defaults of preset `name`."""
    presets = _load()["presets"]
    if name not in presets:
        raise RecxError(f"--preset {name!r}: unknown; valid: {', '.join(sorted(presets))}")
    unknown = set(presets[name]) - PRESET_KEYS
    if unknown:
        raise RecxError(f"{PRESETS_FILE}: preset {name!r} has unknown keys {sorted(unknown)}")
    return dict(presets[name])


def dataset_spec(name: str) -> dict | None:
    """The download spec of a named dataset (format, url, sha256, file; or manual instructions), or None."""
    spec = _load()["datasets"].get(name)
    return None if spec is None else dict(spec)


def dataset_names() -> list[str]:
    return sorted(_load()["datasets"])
