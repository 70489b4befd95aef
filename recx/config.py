"""Run configuration: defaults, validation against the registries, and the run id (hash of the resolved config)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from recx import config_schema
from recx.errors import RecxError
from recx.losses import LOSSES
from recx.models import MODELS
from recx.samplers import SAMPLERS
from recx.samplers.kernels.backend import KERNELS

WEIGHT_DECAY_MODES = ("none", "full", "batch")
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class RunConfig:
    """Every field has a default; `resolve` fills the method-specific `*_args` with their classes' defaults."""

    dataset: str = "synthetic"
    model: str = "mf"
    loss: str = "softmax"
    sampler: str = "uniform"
    dim: int = 64
    epochs: int = 30
    batch_size: int = 2048
    n_negatives: int = 100
    lr: float = 1e-3
    weight_decay: float = 0.0
    weight_decay_mode: str = "full"
    seed: int = 0
    device: str = "auto"
    kernels: str = "auto"  # sampler kernels: auto (CuPy on CUDA when installed), torch or cupy
    patience: int = 5
    valid_metric: str = "ndcg@20"
    eval_every: int = 1
    eval_batch_size: int = 1024
    model_args: dict = field(default_factory=dict)
    loss_args: dict = field(default_factory=dict)
    sampler_args: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def run_id(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def valid_metric_name(self) -> tuple[str, int]:
        name, _, k = self.valid_metric.partition("@")
        return name, int(k)


def _fill_args(kind: str, args_class, given: dict, where: str) -> dict:
    known = {f.name for f in fields(args_class)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise RecxError(f"{where}: unknown key {unknown[0]!r} for {kind}; valid: {', '.join(sorted(known)) or '(none)'}")
    config_schema.check_args(args_class, given, where)
    try:
        return dataclasses.asdict(args_class(**given))
    except TypeError as exc:
        raise RecxError(f"{where}: {exc}") from None


def resolve(raw: dict, where: str = "config") -> RunConfig:
    """Validate keys, names and ranges (recx.config_schema), fill method defaults. Errors name the key at fault."""
    known = {f.name: f for f in fields(RunConfig)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise RecxError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(known)}")
    defaults = RunConfig()
    values = {k: config_schema.coerce(k, v, getattr(defaults, k), where) for k, v in raw.items()}
    config = RunConfig(**values)
    loss_class = LOSSES.get(config.loss)
    if loss_class.required_sampler is not None:
        if "sampler" in raw and raw["sampler"] != loss_class.required_sampler:
            raise RecxError(f"{where}: loss {config.loss!r} is defined with sampler {loss_class.required_sampler!r}, "
                            f"not {raw['sampler']!r}")
        config.sampler = loss_class.required_sampler
    config.model_args = _fill_args(f"model {config.model!r}", MODELS.get(config.model).Args, config.model_args,
                                   f"{where}: model_args")
    config.loss_args = _fill_args(f"loss {config.loss!r}", loss_class.Args, config.loss_args, f"{where}: loss_args")
    config.sampler_args = _fill_args(f"sampler {config.sampler!r}", SAMPLERS.get(config.sampler).Args,
                                     config.sampler_args, f"{where}: sampler_args")
    if config.weight_decay_mode not in WEIGHT_DECAY_MODES:
        raise RecxError(f"{where}: weight_decay_mode {config.weight_decay_mode!r}; valid: {', '.join(WEIGHT_DECAY_MODES)}")
    if config.device not in DEVICES:
        raise RecxError(f"{where}: device {config.device!r}; valid: {', '.join(DEVICES)}")
    if config.kernels not in KERNELS:
        raise RecxError(f"{where}: kernels {config.kernels!r}; valid: {', '.join(KERNELS)}")
    metric, _, k = config.valid_metric.partition("@")
    if metric not in ("ndcg", "recall", "precision", "mrr", "hitrate") or not k.isdigit():
        raise RecxError(f"{where}: valid_metric {config.valid_metric!r}; expected e.g. ndcg@20 or recall@50")
    return config


def deep_merge(base: dict, extra: dict) -> dict:
    """`extra` over `base`, merging nested mappings (e.g. sampler_args) key by key."""
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = deep_merge(merged.get(key) or {}, value) if isinstance(value, dict) else value
    return merged


def read_yaml_mapping(path: Path, what: str) -> dict:
    """A YAML file whose top level is a mapping; errors name the file."""
    if not path.is_file():
        raise RecxError(f"{path}: no such {what}")
    try:
        content = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RecxError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(content, dict):
        raise RecxError(f"{path}: expected a mapping at the top level of the {what}")
    return content


def load_config_file(path: Path) -> dict:
    return read_yaml_mapping(path, "config file")
