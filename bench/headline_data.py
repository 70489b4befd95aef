"""The data the five headline experiments read, as a pack carries it: one definition for bench/headlines_pack.py
(which copies it into `.headlines-pack/`) and bench/gpu_headlines.py (which prepares the datasets from it on a bare
machine).

Each headline dataset has a recipe in experiments.yaml's `datasets:` (format, source, preset, ratios, seed); its
source is a file under `../shared/data` (the recipe's path, relative to experiments.yaml). The pack holds that file at
`data/<its path under ../shared/data>`, and `recx prepare` reads it from there with the recipe's other options, so the
prepared datasets are those of `make reproduce-headlines`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from recx.sweeps.experiments import experiment_spec, load_experiments

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments.yaml"
SHARED_DATA = ROOT.parent / "shared" / "data"
HEADLINES = ("prism-headline", "hns-headline", "bir-headline", "fastvae-headline", "rg-headline")
OPTIONS = {"format", "source", "preset", "ratios", "seed", "rating", "kcore", "split"}  # recx prepare's, by recipe key


def recipes(names: tuple[str, ...] = HEADLINES, path: Path = EXPERIMENTS) -> dict[str, dict]:
    """Each dataset the experiments `names` train on -> its recipe (datasets listed once, in order of use)."""
    content = load_experiments(path)
    found = {}
    for name in names:
        for dataset in experiment_spec(content, name, path)["datasets"]:
            recipe = (content.get("datasets") or {}).get(dataset)
            if recipe is None or not recipe.get("source"):
                raise SystemExit(f"{path}: dataset {dataset!r} of {name} has no recipe with a source")
            unknown = set(recipe) - OPTIONS
            if unknown:
                raise SystemExit(
                    f"{path}: datasets.{dataset}: key {sorted(unknown)[0]!r} has no recx prepare option here"
                )
            found[dataset] = recipe
    return found


def packed_path(recipe: dict, base: Path = ROOT) -> str:
    """Where the recipe's source lies in a pack's data folder: its path under ../shared/data."""
    source = Path(os.path.normpath(base / recipe["source"]))
    shared = Path(os.path.normpath(base.parent / "shared" / "data"))
    if not source.is_relative_to(shared):
        raise SystemExit(f"source {recipe['source']} is not under {shared}: the pack carries ../shared/data only")
    return source.relative_to(shared).as_posix()


def prepare_command(python: str, dataset: str, recipe: dict, data: Path, root: Path) -> list[str]:
    """`recx prepare DATASET` from the pack's data folder `data` into the data root `root`, with the recipe's options."""
    options = []
    for key, value in recipe.items():
        shown = str(data / packed_path(recipe)) if key == "source" else str(value)
        options += [f"--{key}", shown]
    return [python, "-m", "recx", "prepare", dataset, *options, "--data-root", str(root)]


def synthetic_mat(path: Path, n_users: int = 600, n_items: int = 1200, per_user: int = 50, seed: int = 0) -> None:
    """A users x items .mat (`data` key) small enough for a dry run, big enough for the headlines' settings: every
    item kept by the 10-core filter (FastVAE's 1,000 negatives need more items than that)."""
    import scipy.io
    import scipy.sparse

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_items + 1) ** 0.3
    items = [rng.choice(n_items, size=per_user, replace=False, p=weights / weights.sum()) for _ in range(n_users)]
    users = np.repeat(np.arange(n_users), per_user)
    matrix = scipy.sparse.csr_matrix((np.ones(users.size), (users, np.concatenate(items))), shape=(n_users, n_items))
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"data": matrix})
