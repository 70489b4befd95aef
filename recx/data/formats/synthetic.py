"""A generated dataset with power-law item popularity and latent user/item structure (the built-in default)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from recx.core.errors import RecxError
from recx.data.formats.registry import FORMATS
from recx.data.raw import RawInteractions

# The generator's settings (`synthetic:` of a dataset, `recx.prepare(..., synthetic={...})`): type and least value.
SETTINGS = {
    "n_users": (int, 1),
    "n_items": (int, 2),
    "dim": (int, 1),
    "mean_length": (float, 1),
    "zipf": (float, 0),
    "affinity": (float, 0),
}


def check_settings(settings: dict) -> None:
    """Each setting known, of its type and at least its least value; the RecxError names the setting (a typo was
    ignored, a text ended in a TypeError inside numpy)."""
    for key, value in settings.items():
        if key not in SETTINGS:
            raise RecxError(f"synthetic: unknown setting {key!r}; valid: {', '.join(SETTINGS)}")
        kind, least = SETTINGS[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)) or not math.isfinite(value) or value < least:
            what = "an integer" if kind is int else "a number"
            raise RecxError(f"synthetic.{key} = {value!r}: expected {what} >= {least}")


@FORMATS.register("synthetic")
def generate_synthetic(
    source: Path | None = None,
    seed: int = 0,
    n_users: int = 3000,
    n_items: int = 1500,
    dim: int = 8,
    mean_length: float = 30.0,
    zipf: float = 0.8,
    affinity: float = 2.5,
    skip_bad_lines: bool = False,
    report=None,
    **unknown,
) -> RawInteractions:
    """Users pick items without replacement with probability ∝ exp(u·v + zipf · log popularity_weight).

    Item weights follow a power law 1 / rank^zipf over a random item order; user/item factors are normal, scaled
    so that u·v has standard deviation `affinity`: both the latent part and the popularity part are learnable. Each user's length is
    1 + Poisson(mean_length - 1), capped at half the items. Gumbel top-k draws all users at once.
    """
    given = {"n_users": n_users, "n_items": n_items, "dim": dim, "mean_length": mean_length, "zipf": zipf}
    check_settings({**given, "affinity": affinity, **unknown})
    rng = np.random.default_rng(seed)
    scale = (affinity / dim**0.5) ** 0.5
    users = rng.standard_normal((n_users, dim)) * scale
    items = rng.standard_normal((n_items, dim)) * scale
    rank = rng.permutation(n_items) + 1
    log_weight = -zipf * np.log(rank)
    logits = users @ items.T + log_weight[None, :]
    lengths = np.minimum(1 + rng.poisson(mean_length - 1, n_users), n_items // 2)
    perturbed = logits + rng.gumbel(size=logits.shape)
    order = np.argsort(-perturbed, axis=1, kind="stable")[:, : lengths.max()]
    keep = np.arange(order.shape[1])[None, :] < lengths[:, None]
    user_ids = np.broadcast_to(np.arange(n_users)[:, None], order.shape)[keep]
    return RawInteractions(user_ids.astype(np.int64), order[keep].astype(np.int64))
