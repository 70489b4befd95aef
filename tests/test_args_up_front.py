"""Every argument a registered sampler, model or loss can refuse from its arguments alone is refused by `resolve`
(its `Args` checks itself in `__post_init__`), so a sweep's plan and `recx sweep --dry-run` refuse it before any
run starts, with one message naming the key (issue 23, "Validation in two places")."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS

# (config key of the registry, registered name, rest of the config, bad arguments, a word of the message)
BAD = [
    ("sampler", "dns", {"loss": "bpr", "n_negatives": 1}, {"m": 500, "n_candidates": 200}, "n_candidates"),
    ("sampler", "kernel", {}, {"alpha": -1.0}, "alpha"),
    ("sampler", "popularity", {}, {"variant": "nope"}, "variant"),
    ("sampler", "self_adversarial", {}, {"temperature": 0.0}, "temperature"),
    ("sampler", "softmax_v", {"loss": "bpr", "n_negatives": 1}, {"n_candidates": 1}, "n_candidates"),
    ("sampler", "xir", {}, {"cache_weight": 2.0}, "cache_weight"),
    ("sampler", "bir", {}, {"n_resampled": -1}, "n_resampled"),
    ("sampler", "bir_iw", {}, {"n_resampled": -1}, "n_resampled"),
    ("sampler", "midx", {}, {"kmeans_tolerance": 1.5}, "kmeans_tolerance"),
    ("sampler", "midx_uni", {}, {"kmeans_init": "nope"}, "kmeans_init"),
    ("sampler", "midx_pop", {}, {"variant": "nope"}, "variant"),
    ("model", "lightgcn", {}, {"n_layers": -1}, "n_layers"),
    ("model", "mf", {}, {"temperature": 0.0}, "temperature"),
    ("model", "multvae", {"loss": "full_softmax", "sampler": "full"}, {"dropout": 1.0}, "dropout"),
    ("model", "fastvae", {"sampler": "midx_pop"}, {"dropout_at": "nope"}, "dropout_at"),
    ("model", "wrmf", {}, {"confidence": "nope"}, "confidence"),
    ("model", "rg2", {}, {"alpha": -1.0}, "alpha"),
    ("model", "rgx", {}, {"form": "nope"}, "form"),
    ("loss", "bpr", {}, {"reduction": "nope"}, "reduction"),
    ("loss", "directau", {"sampler": "in_batch"}, {"uniformity_rows": "nope"}, "uniformity_rows"),
    ("loss", "mawu", {"sampler": "in_batch"}, {"alignment": "nope"}, "alignment"),
]
REGISTRIES = {"sampler": SAMPLERS, "model": MODELS, "loss": LOSSES}


def raw(kind: str, name: str, rest: dict, args: dict) -> dict:
    return {kind: name, **rest, f"{kind}_args": args}


@pytest.mark.parametrize("kind, name, rest, args, word", BAD, ids=[f"{k}-{n}" for k, n, *_ in BAD])
def test_resolve_refuses_a_bad_argument_naming_it(kind, name, rest, args, word):
    resolve(raw(kind, name, rest, {}))  # the same run with its default arguments is fine
    with pytest.raises(RecxError, match=word):
        resolve(raw(kind, name, rest, args))


def test_every_args_class_that_checks_itself_has_a_case():
    """A newly registered class whose Args checks itself joins BAD (the registries are read, not a hand list)."""
    covered = {(kind, name) for kind, name, *_ in BAD}
    for kind, registry in REGISTRIES.items():
        for name in registry.names():
            args = getattr(registry.get(name), "Args", None)
            if args is not None and dataclasses.is_dataclass(args) and "__post_init__" in vars(args):
                assert (kind, name) in covered, f"{kind} {name!r}: its Args checks itself; add a case to BAD"


def test_sweep_dry_run_refuses_before_any_run(tmp_path, recx_cli):
    experiment = {
        "experiments": {
            "bad": {
                "datasets": ["synthetic"],
                "methods": {
                    "dns": {
                        "loss": "bpr",
                        "sampler": "dns",
                        "n_negatives": 1,
                        "sampler_args": {"m": 500, "n_candidates": 200},
                    }
                },
            }
        }
    }
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(experiment))
    result = recx_cli("sweep", path, "-e", "bad", "--dry-run", "--out", tmp_path / "out")
    assert result.code == 1 and "sampler_args.m = 500" in result.err and "Traceback" not in result.err
    assert "methods.dns" in result.err.replace("\n", "") and not (tmp_path / "out").exists()
