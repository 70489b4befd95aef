"""Run configuration: defaults, validation against the registries, and the run id (hash of the resolved config).

Nothing here names a component: the default sampler, loss and model are the registries' defaults, each component's
arguments, ranges, default bundles and pairings are declared by its own class, and `resolve` asks the registries.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from recx.config.schema import coerce, declared, setting
from recx.core import plugins, yaml_values
from recx.core.args import Range, check_args, recorded
from recx.core.errors import RecxError
from recx.eval.metrics.registry import METRICS, validation_metrics
from recx.kernels.choice import KERNELS
from recx.losses.base import Bundle
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.optim.optimizers import OPTIMIZERS
from recx.samplers.registry import SAMPLERS

WEIGHT_DECAY_MODES = ("none", "full", "batch")
DEVICES = ("auto", "cpu", "cuda")
NO_LOSS_DEFAULTS: dict[str, Any] = {}
NO_SKIPPED_BUNDLES: tuple[tuple[dict, dict], ...] = ()
CODE_ROLES = ("model", "loss", "sampler", "metric")  # the names a run's configuration takes from a registry


@dataclass
class RunConfig:
    """Every run setting, declared once (recx.config.schema.setting: default, help, range or choices); `resolve`
    fills the component-specific `*_args` with their classes' defaults. The fields' order is `--help`'s."""

    dataset: str = setting("synthetic", "Prepared dataset name (a folder under the data root).")
    model: str = setting(factory=lambda: MODELS.default, help="Model (`recx list models`).", registered="models")
    loss: str = setting(factory=lambda: LOSSES.default, help="Loss (`recx list losses`).", registered="losses")
    sampler: str = setting(
        factory=lambda: SAMPLERS.default, help="Negative sampler (`recx list samplers`).", registered="samplers"
    )
    dim: int = setting(64, "Embedding dimension.", range=Range(int, 1, 65_536))
    epochs: int = setting(30, "Maximum number of epochs.", range=Range(int, 1, 100_000))
    batch_size: int = setting(2048, "Training interactions per step.", range=Range(int, 1, 100_000_000))
    n_negatives: int = setting(100, "Negatives per query (or shared per batch).", range=Range(int, 1, 10_000_000))
    lr: float = setting(5e-3, "Learning rate.", range=Range(float, 0, low_open=True))
    lr_step_epochs: int = setting(
        0,
        "Multiply the learning rate by lr_step_gamma every N epochs (0: a constant rate).",
        range=Range(int, 0, 100_000),
    )
    lr_step_gamma: float = setting(
        0.95, "The factor of each learning-rate step.", range=Range(float, 0, 1, low_open=True)
    )
    # alternating solvers: validated after each half-step, a tie in validation an improvement (RecStudio's loop and
    # EarlyStopping)
    half_steps: bool = setting(
        False, "Alternating solvers: an epoch is one half-step, validated after each.", only_when_set=True
    )
    # drawn once from the seed (PRISM's loader: shuffle=False over its randomly split edges); else a new order each
    # epoch from the run's generator
    fixed_order: bool = setting(
        False,
        "Every epoch takes the training examples in one order drawn once from the seed (PRISM's loader).",
        only_when_set=True,
    )
    # recx.core.device.deterministic_algorithms
    deterministic: bool = setting(
        False,
        "On CUDA, torch's deterministic algorithms, so that the same seed repeats bit for bit as on the CPU "
        "(LightGCN's and the ALS models' sparse products summed row by row in a fixed order).",
        only_when_set=True,
    )
    optimizer: str = setting(
        "auto", "Optimizer; auto: the model's and sampler's pairing.", choices=("auto",) + OPTIMIZERS
    )  # auto: `resolve_optimizer`
    weight_decay: float = setting(0.0, "Weight decay strength.", range=Range(float, 0))
    weight_decay_mode: str = setting(
        "full",
        "Where weight decay applies: full (every row, every step), batch (the rows a step touches) or none.",
        choices=WEIGHT_DECAY_MODES,
    )
    seed: int = setting(0, "Seed of initialisation, shuffling and sampling.", range=Range(int, 0, 2**63 - 1))
    device: str = setting("auto", "Where to train.", choices=DEVICES)
    kernels: str = setting(
        "auto", "Sampler kernels: auto (CuPy on CUDA when installed), torch or cupy.", choices=KERNELS
    )
    patience: int = setting(5, "Validations without improvement before stopping.", range=Range(int, 1, 100_000))
    valid_metric: str = setting("ndcg@20", "Validation metric, name@k: early stopping and the best epoch.")
    eval_every: int = setting(1, "Validate every N epochs.", range=Range(int, 1, 100_000))
    eval_batch_size: int = setting(
        1024, "Users per evaluation batch (results do not depend on it).", range=Range(int, 1, 10_000_000)
    )
    model_args: dict = setting(
        factory=dict, help="The model's arguments, a YAML mapping such as '{dropout: 0.5}' (`recx list models`)."
    )
    loss_args: dict = setting(
        factory=dict, help="The loss's arguments, a YAML mapping such as '{temperature: 0.1}' (`recx list losses`)."
    )
    sampler_args: dict = setting(
        factory=dict,
        help="The sampler's arguments, a YAML mapping such as '{variant: log}' (`recx list samplers`).",
    )
    # The code of the plugins the run's names come from: {role: sha256} for each of model, loss, sampler and the
    # validation metric that a plugin registers (recx's own names: absent). Filled by `resolve`; part of the run id,
    # so another version of a plugin's code makes other runs. Empty for a run of built-in names (its id unchanged).
    plugin_code: dict = setting(factory=dict, only_when_set=True)
    # Not a setting (no annotation, so not a field: outside the run id and config.yaml): the keys `resolve` filled from
    # the loss's defaults, which `non_default_settings` lists apart.
    loss_defaults_applied = NO_LOSS_DEFAULTS
    # Nor this: the loss's default bundles left out because the run is not the setup they were measured on (their
    # values, then {key: (what the bundle requires, what the run has)}), which `bundle_note` states.
    loss_defaults_skipped = NO_SKIPPED_BUNDLES

    def to_dict(self) -> dict:
        """Every setting, as config.yaml holds it; the keys that came after runs were first written (declared
        `only_when_set`) only when set, so that a run folder written before them still holds this run's configuration."""
        settings = dataclasses.asdict(self)
        return {key: value for key, value in settings.items() if key not in ONLY_WHEN_SET or value}

    def run_id(self) -> str:
        """Hash of the settings (to_dict); the schedule's keys join it only when a schedule is set, so that a run
        without one keeps the id it had before the keys existed."""
        settings = self.to_dict()
        if not self.lr_step_epochs:
            del settings["lr_step_epochs"], settings["lr_step_gamma"]
        canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def valid_metric_name(self) -> tuple[str, int]:
        name, _, k = self.valid_metric.partition("@")
        return name, int(k)


HELP = declared(RunConfig, "help")  # the settings a user chooses, in --help's order (plugin_code is recorded)
RANGES = declared(RunConfig, "range")
CHOICES = declared(RunConfig, "choices")
REGISTERED = declared(RunConfig, "registered")  # settings that name a registered class: their catalogue kind
ONLY_WHEN_SET = tuple(declared(RunConfig, "only_when_set"))


def _fill_args(kind: str, args_class, given: dict, where: str) -> dict:
    known = {f.name for f in fields(args_class)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise RecxError(
            f"{where}: unknown key {unknown[0]!r} for {kind}; valid: {', '.join(sorted(known)) or '(none)'}"
        )
    check_args(args_class, given, where)
    try:
        return recorded(args_class, dataclasses.asdict(args_class(**given)))
    except (TypeError, RecxError) as exc:  # an Args' own checks (__post_init__) name the key
        raise RecxError(f"{where}: {exc}") from None


def resolve(raw: dict, where: str = "config") -> RunConfig:
    """Validate keys, names and ranges (recx.config.schema), fill component defaults. Errors name the key at fault."""
    known = {f.name: f for f in fields(RunConfig)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise RecxError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(known)}")
    defaults = RunConfig()
    model = raw.get("model", defaults.model)
    if "loss" not in raw and model in MODELS and len(MODELS.get(model).losses or ()) == 1:
        raw = {**raw, "loss": MODELS.get(model).losses[0]}  # the one loss the model trains with
    raw, applied, skipped = _loss_defaults(raw)
    values = {key: coerce(known[key], value, getattr(defaults, key), where) for key, value in raw.items()}
    config = RunConfig(**values)
    config.loss_defaults_applied, config.loss_defaults_skipped = applied, skipped
    model_class, loss_class = MODELS.get(config.model), LOSSES.get(config.loss)
    if loss_class.required_sampler is not None:
        if "sampler" in raw and raw["sampler"] != loss_class.required_sampler:
            raise RecxError(
                f"{where}: loss {config.loss!r} is defined with sampler {loss_class.required_sampler!r}, "
                f"not {raw['sampler']!r}"
            )
        config.sampler = loss_class.required_sampler
    config.model_args = _fill_args(
        f"model {config.model!r}", model_class.Args, config.model_args, f"{where}: model_args"
    )
    config.loss_args = _fill_args(f"loss {config.loss!r}", loss_class.Args, config.loss_args, f"{where}: loss_args")
    config.sampler_args = _fill_args(
        f"sampler {config.sampler!r}", SAMPLERS.get(config.sampler).Args, config.sampler_args, f"{where}: sampler_args"
    )
    config.optimizer = resolve_optimizer(config)
    check_pairings(config, where)
    if config.optimizer != "adam" and config.weight_decay_mode == "full" and config.weight_decay > 0:
        raise RecxError(
            f"{where}: optimizer {config.optimizer!r} updates only the rows a step touches, so it cannot "
            f"apply weight_decay_mode 'full' (every row, every step); use optimizer 'adam' or "
            f"weight_decay_mode 'batch'"
        )
    check_lr_schedule(config, where)
    check_valid_metric(config.valid_metric, where)
    config.plugin_code = checked_plugin_code(config, raw.get("plugin_code"), where)
    return config


def role_names(config: RunConfig) -> dict[str, tuple[Any, str]]:
    """role -> (its registry, the name the configuration gives it)."""
    return {
        "model": (MODELS, config.model),
        "loss": (LOSSES, config.loss),
        "sampler": (SAMPLERS, config.sampler),
        "metric": (METRICS, config.valid_metric_name[0]),
    }


def plugin_code(config: RunConfig) -> dict[str, str]:
    """{role: sha256} of the loaded code of each name the configuration takes from a plugin (recx's own: absent)."""
    found = {}
    for role, (registry, name) in role_names(config).items():
        code = registry.code_hash(name)
        if code is not None:
            found[role] = code
    return found


def describe_code(config: RunConfig, role: str) -> str:
    """`sampler 'mixture' (plugin P 0.1.0, sha256 abcdef123456)` for a plugin's name, as loaded now."""
    registry, name = role_names(config)[role]
    obj = registry.get(name)
    owner = registry.owner(name)
    found = plugins.plugin_of(getattr(obj, "__module__", ""))
    source = found.describe() if found else owner
    code = registry.code_hash(name)
    return f"{role} {name!r} ({source}, code sha256 {str(code)[:12]})" if code else f"{role} {name!r} ({owner})"


def checked_plugin_code(config: RunConfig, given, where: str) -> dict[str, str]:
    """The loaded plugin code of the configuration's names; a configuration that records plugin code (a run's
    config.yaml, a sweep's planned run) must name the same code: another version is another run."""
    current = plugin_code(config)
    if given is None or given == current:
        return current
    for role in sorted(set(given) | set(current)):
        if given.get(role) != current.get(role):
            recorded = given.get(role)
            if role not in current:
                loaded = f"{role} {role_names(config)[role][1]!r} is recx's own now"
            else:
                loaded = f"the loaded code is {describe_code(config, role)}"
            raise RecxError(
                f"{where}: plugin_code.{role} = {str(recorded)[:12]}...: the configuration was made with other code "
                f"for its {role} ({loaded}); another version of a plugin's code is another run (another run id). "
                "Leave plugin_code out to configure a run of the loaded code, or load the plugin version it records"
            )
    return current


def check_valid_metric(value: str, where: str) -> None:
    """`valid_metric` is a per-user accuracy metric with a cut-off (`metric@K`): early stopping keeps the epoch
    where it is highest, so it must reward hits (a beyond-accuracy or catalogue-level metric is refused)."""
    metric, _, k = value.partition("@")
    allowed = validation_metrics()
    if metric in allowed and k.isdecimal() and len(k) <= 9:
        return
    shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value):,} characters)"
    why = ""
    if metric in METRICS and METRICS.get(metric).cutoff and k.isdecimal() and len(k) <= 9:
        kind = "catalogue-level" if METRICS.get(metric).level == "catalogue" else "per-user"
        why = (
            f" ({metric!r} is a {kind} metric that does not reward hits; validation keeps the epoch where "
            "valid_metric is highest, so it must be a per-user accuracy metric)"
        )
    raise RecxError(
        f"{where}: valid_metric {shown}{why}; expected a metric with a cut-off, such as ndcg@20 or recall@50 (a "
        f"per-user accuracy metric, K of at most 9 digits; metrics: {', '.join(allowed)})"
    )


def check_pairings(config: RunConfig, where: str) -> None:
    """What the model's class declares it trains with (recx.models.base.Model): its losses, optimizers and weight
    decay modes, a sampler with a closed-form log q, and its own check of its arguments; and the loss's plan-time
    check of the model (`Loss.check_model`)."""
    model_class = MODELS.get(config.model)
    if model_class.losses and config.loss not in model_class.losses:
        raise RecxError(
            f"{where}: model {config.model!r} trains with loss {' or '.join(map(repr, model_class.losses))} (its "
            f"likelihood), not {config.loss!r}"
        )
    if model_class.optimizers and config.optimizer not in model_class.optimizers:
        raise RecxError(
            f"{where}: model {config.model!r} trains with optimizer {' or '.join(map(repr, model_class.optimizers))} "
            f"(its official code's), not {config.optimizer!r}; leave optimizer out or set it to "
            f"{model_class.optimizers[0]}"
        )
    loss_class = LOSSES.get(config.loss)
    if loss_class.decays_with_model(loss_class.Args(**config.loss_args)) and config.weight_decay_mode != "full":
        raise RecxError(
            f"{where}: loss {config.loss!r} decays its own parameters with the model's only in weight_decay_mode "
            f"'full' (here {config.weight_decay_mode!r}): the decay of every row every step; set it as well, or "
            "leave the loss's decay out"
        )
    if config.half_steps and not model_class.alternates:
        raise RecxError(
            f"{where}: half_steps = true: model {config.model!r} is not fitted by alternating half-steps; "
            "leave half_steps out"
        )
    if config.fixed_order and not model_class.ordered_examples:
        raise RecxError(
            f"{where}: fixed_order = true: model {config.model!r} ({model_class.runner_note}) takes no batches in an "
            "order; leave fixed_order out"
        )
    if config.weight_decay_mode not in model_class.weight_decay_modes:
        raise RecxError(
            f"{where}: weight_decay_mode {config.weight_decay_mode!r} is not defined for model {config.model!r}; "
            f"use {' or '.join(model_class.weight_decay_modes)}"
        )
    if model_class.closed_form_sampler and not SAMPLERS.get(config.sampler).has_closed_form():
        closed = [name for name in SAMPLERS.names() if SAMPLERS.get(name).has_closed_form()]
        raise RecxError(
            f"{where}: model {config.model!r} reads each positive's log q from its sampler's closed form, which "
            f"sampler {config.sampler!r} has not; choose one of {', '.join(closed)}"
        )
    try:
        model_class.check_args(model_class.Args(**config.model_args))
        if model_class.losses != ():  # a model with its own objective trains without the configuration's loss
            loss_class = LOSSES.get(config.loss)
            loss_class.check_model(config.model, dict(config.model_args), loss_class.Args(**config.loss_args))
    except RecxError as exc:
        raise RecxError(f"{where}: {exc}") from None


def check_lr_schedule(config: RunConfig, where: str) -> None:
    """`lr_step_gamma` only beside a schedule (`lr_step_epochs` > 0), and a schedule only for a model trained by
    gradient steps (the alternating solvers and MostPop have no learning rate)."""
    gamma_default = next(f.default for f in fields(RunConfig) if f.name == "lr_step_gamma")
    if not config.lr_step_epochs and config.lr_step_gamma != gamma_default:
        raise RecxError(
            f"{where}: lr_step_gamma = {config.lr_step_gamma} applies only with a schedule "
            f"(lr_step_epochs > 0; here 0); set lr_step_epochs as well, or leave lr_step_gamma out"
        )
    model_class = MODELS.get(config.model)
    if config.lr_step_epochs and model_class.optimizers == ():
        raise RecxError(
            f"{where}: lr_step_epochs = {config.lr_step_epochs}: model {config.model!r} is not trained by "
            f"gradient steps ({model_class.runner_note}: no learning rate); leave lr_step_epochs out"
        )


def _args_class(kind: str, name: str):
    registry = {"model_args": MODELS, "sampler_args": SAMPLERS, "loss_args": LOSSES}[kind]
    return registry.get(name).Args if name in registry.names() else None


def has_key(raw: dict, dotted: str) -> bool:
    """Whether `raw` sets `dotted` (`lr`, or `model_args.alpha` inside its mapping)."""
    head, _, tail = dotted.partition(".")
    return head in raw and (not tail or tail in (raw[head] or {}))


def plain_default(key: str):
    """RunConfig's own default of `key` (the registries' defaults for model, loss and sampler)."""
    return getattr(RunConfig(), key)


def _raw_args_class(raw: dict, kind: str):
    """The Args class of the component `raw` names (or the default one) for `kind` ("model_args", ...)."""
    owner = {"model_args": "model", "sampler_args": "sampler", "loss_args": "loss"}[kind]
    return _args_class(kind, raw.get(owner, plain_default(owner)))


def _can_take(raw: dict, dotted: str) -> bool:
    head, _, tail = dotted.partition(".")
    if not tail:
        return True
    args_class = _raw_args_class(raw, head)
    return args_class is not None and tail in {f.name for f in fields(args_class)}


def default_bundles(loss: str) -> tuple[Bundle, ...]:
    """The loss's default bundles (none for a name the registry does not know: `resolve` refuses it)."""
    return LOSSES.get(loss).default_bundles if loss in LOSSES else ()


def loss_default(loss: str, key: str):
    """The value a loss's default bundle gives `key` (None when no bundle of the loss sets it)."""
    return next((bundle.values[key] for bundle in default_bundles(loss) if key in bundle.values), None)


def _setting(raw: dict, dotted: str):
    """The value `raw` gives `dotted`, else its plain default (RunConfig's, or the named component's Args)."""
    head, _, tail = dotted.partition(".")
    if not tail:
        return raw[head] if head in raw else plain_default(head)
    if tail in (raw.get(head) or {}):
        return raw[head][tail]
    args_class = _raw_args_class(raw, head)
    return next((f.default for f in fields(args_class) if f.name == tail), None) if args_class else None


def apply_loss_defaults(raw: dict) -> tuple[dict, dict]:
    """(`raw` with its loss's default bundles (`Loss.default_bundles`) filled in, the dotted keys and values that
    were filled). Models trained without a loss (`Model.losses` empty: alternating solvers, MostPop) get none."""
    filled, applied, _ = _loss_defaults(raw)
    return filled, applied


def _loss_defaults(raw: dict) -> tuple[dict, dict, tuple]:
    """apply_loss_defaults, and the bundles left out only because the run is not the setup they require (none of
    their keys set): ((values, {key: (required, the run's)}), ...)."""
    model = raw.get("model", plain_default("model"))
    if model in MODELS and MODELS.get(model).losses == ():
        return raw, {}, ()
    applied, filled, skipped = {}, raw, []
    for values, blocked_by, requires in default_bundles(raw.get("loss", plain_default("loss"))):
        if any(has_key(raw, key) for key in (*values, *blocked_by)) or not all(_can_take(raw, k) for k in values):
            continue
        differ = {key: (value, _setting(filled, key)) for key, value in (requires or {}).items()}
        differ = {key: pair for key, pair in differ.items() if pair[0] != pair[1]}
        if differ:
            skipped.append((dict(values), differ))
            continue
        applied.update(values)
        for dotted, value in values.items():
            head, _, tail = dotted.partition(".")
            filled = deep_merge(filled, {head: {tail: value}} if tail else {head: value})
    return filled, applied, tuple(skipped)


def resolve_optimizer(config: RunConfig) -> str:
    """`auto`: dense Adam when weight_decay_mode 'full' decays every row every step, else the loss's
    `auto_optimizer` (dense Adam for the softmax losses over many items, lazy Adam otherwise)."""
    if config.optimizer != "auto":
        return config.optimizer
    full_decay = config.weight_decay_mode == "full" and config.weight_decay > 0
    return "adam" if full_decay else LOSSES.get(config.loss).auto_optimizer


def non_default_settings(config: RunConfig) -> str:
    """The resolved configuration's keys that differ from the plain defaults, as `set: k=v, ...; defaults for
    <loss>: k=v, ...; optimizer <name>` (the per-loss defaults listed apart, the optimizer always named)."""
    plain, applied = RunConfig(), config.loss_defaults_applied
    changed = []
    for f in fields(RunConfig):
        value = getattr(config, f.name)
        if f.name.endswith("_args"):
            reference = dataclasses.asdict(_args_class(f.name, getattr(config, f.name[: -len("_args")]))())
            changed += [(f"{f.name}.{k}", v) for k, v in value.items() if reference.get(k) != v]
        elif f.name not in ("optimizer", "plugin_code") and value != getattr(plain, f.name):
            changed.append((f.name, value))
    given = ", ".join(f"{k}={v}" for k, v in changed if k not in applied) or "(nothing)"
    parts = [f"set: {given}"]
    if applied:
        parts.append(f"defaults for {config.loss}: " + ", ".join(f"{k}={v}" for k, v in changed if k in applied))
    model_class = MODELS.get(config.model)
    trainer = model_class.runner_note if model_class.optimizers == () else f"optimizer {config.optimizer}"
    return "; ".join(parts + [trainer])


def _value_of(config: RunConfig, dotted: str):
    head, _, tail = dotted.partition(".")
    value = getattr(config, head)
    return value.get(tail) if tail else value


def bundle_note(config: RunConfig) -> str | None:
    """When a default bundle of the run's loss was left out because the run is not the setup it was measured on
    (e.g. softmax's row-wise Adagrad at lr 0.02 belongs to MF over 2000 shared uniform candidates; a popularity
    sampler keeps `optimizer: auto`, dense Adam, at the plain lr 5e-3): which, why, and what the run trains with
    instead (the switch to a ~20x slower optimizer is never silent); None otherwise. A bundle whose
    optimizer the model does not train with is not mentioned (the model fixes it)."""
    model_class = MODELS.get(config.model)
    notes = []
    for values, differ in config.loss_defaults_skipped:
        if model_class.optimizers and values.get("optimizer") not in (None, *model_class.optimizers):
            continue
        bundle = ", ".join(f"{key}={value}" for key, value in values.items())
        required = ", ".join(f"{key}={wanted}" for key, (wanted, _) in differ.items())
        found = ", ".join(f"{key}={found}" for key, (_, found) in differ.items())
        instead = ", ".join(f"{key}={_value_of(config, key)}" for key in values)
        notes.append(
            f"{config.loss}'s default {bundle} is left out: it is measured for {required} (this run: {found}), so "
            f"the run trains with {instead}; set {' and '.join(values)} to choose"
        )
    return "; ".join(notes) or None


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
        content = yaml_values.load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RecxError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(content, dict):
        raise RecxError(f"{path}: expected a mapping at the top level of the {what}")
    return content


def load_config_file(path: Path) -> dict:
    return read_yaml_mapping(path, "config file")


def check_against_dataset(config, n_items: int, ks: list[int], default_negatives: int, where: str) -> None:
    """Settings that depend on the data: cut-offs, and an n_negatives the user set (not a default, nor a loss's
    default bundle) within the catalogue."""
    if max(ks) > n_items:
        raise RecxError(
            f"{where}: K={max(ks)} is larger than the number of items ({n_items}); choose cut-offs of "
            f"at most {n_items} (recx train --ks 5,10 --valid-metric ndcg@10; an experiment's ks)"
        )
    explicit = config.n_negatives not in (default_negatives, loss_default(config.loss, "n_negatives"))
    if config.n_negatives > n_items and explicit:
        raise RecxError(
            f"{where}: n_negatives = {config.n_negatives} is larger than the catalogue of dataset "
            f"{config.dataset!r} ({n_items} items); expected at most {n_items}"
        )
