"""A runner's state as data: what a checkpoint holds of it, and how it is put back on a freshly built runner.

`state_of(runner, shared)` walks the runner's attributes and returns a tree of tensors, numbers, strings, None,
tuples, lists and dicts, which torch's `weights_only` loader reads without running any code:
- an object in `shared` (the run's config, dataset, model, the model's parameters and buffers, the split tensors)
  becomes its name, `{"~shared": name}`: the resuming process has its own;
- a tensor is kept as it is (a parameter detached); a random generator becomes its state, `{"~generator": state}`;
- an object with `state_dict` (optimizers, learning-rate schedulers, modules) becomes that, `{"~state_dict": ...}`;
- a dataclass instance is configuration (a component's `Args`) or data built from it and the dataset (the ALS
  problem), which the resuming process builds again: left out, as are functions, methods and classes;
- any other object (a sampler, a loss, a schedule, codebooks) becomes its attributes, `{"~object": {name: ...}}`,
  each walked by the same rules; an object met again on the walk is `{"~again": path}` (its first place), and the
  resuming runner's own object at that attribute is kept.
A value of any other type is an internal error naming its attribute path: a component keeps its state in the types
above (docs/plugins.md).

`restore(runner, tree, shared)` puts the tree back onto the runner the resuming process built from the same
configuration and data: attributes are set to the saved values, a saved parameter is copied into the runner's own
parameter in place (so the optimizer's references stay attached), generators get their state and `state_dict` objects
`load_state_dict`. Objects are never created: a saved object goes onto the object the runner has at that attribute.
Identity between tensors survives within the tree (pickle's memo), so two attributes that held one tensor hold one
after. A tree that does not fit the runner (another kind of runner, an attribute name that is not one) is a
ValueError.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

SCALARS = (bool, int, float, str, type(None))


def state_of(obj: Any, shared: dict[str, object]) -> dict:
    """The state tree of `obj` (an object walked by its attributes)."""
    names = {id(value): name for name, value in shared.items()}
    return _encode(obj, names, {}, "runner")


def _encode(value: Any, names: dict[int, str], seen: dict[int, Any], path: str) -> Any:
    """`seen`: the tensors and objects met so far on the walk, by id (a tensor met again is the same detached one)."""
    if id(value) in names:
        return {"~shared": names[id(value)]}
    if isinstance(value, torch.Tensor):
        return seen.setdefault(id(value), value.detach())
    if isinstance(value, SCALARS):
        return value
    if isinstance(value, torch.Generator):
        return {"~generator": value.get_state()}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, names, seen, f"{path}[{i}]") for i, item in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {key: _encode(item, names, seen, f"{path}[{key!r}]") for key, item in value.items()}
    if hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
        return {"~state_dict": value.state_dict()}
    if hasattr(value, "__dict__") and not _built_again(value):
        if id(value) in seen:
            return {"~again": seen[id(value)]}
        seen[id(value)] = path
        return {
            "~object": {
                name: _encode(item, names, seen, f"{path}.{name}")
                for name, item in vars(value).items()
                if not _built_again(item)
            }
        }
    raise TypeError(f"{path}: a {type(value).__qualname__} cannot be kept in a checkpoint")


def _built_again(value: Any) -> bool:
    """Configuration and what is built from it (dataclasses), and code (functions, methods, classes)."""
    is_instance = dataclasses.is_dataclass(value) and not isinstance(value, type)
    return is_instance or inspect.isroutine(value) or inspect.isclass(value)


def restore(obj: Any, tree: dict, shared: dict[str, object]) -> None:
    """Put the state tree `tree` of `state_of` back onto `obj`, the same kind of object built afresh."""
    if not (isinstance(tree, dict) and "~object" in tree):
        raise ValueError("the checkpoint holds no runner state")
    _decode(obj, tree, shared, "runner")


def _decode(current: Any, saved: Any, shared: dict[str, object], path: str) -> Any:
    """The value to hold at `path`, where the fresh runner holds `current` and the checkpoint `saved`."""
    if isinstance(saved, torch.Tensor):
        if isinstance(current, torch.nn.Parameter):
            if current.shape != saved.shape:
                raise ValueError(f"{path}: shape {tuple(saved.shape)}, this run's {tuple(current.shape)}")
            with torch.no_grad():
                current.copy_(saved)
            return current
        return saved
    if isinstance(saved, SCALARS):
        return saved
    if isinstance(saved, (list, tuple)):
        fits = isinstance(current, (list, tuple)) and len(current) == len(saved)
        previous = current if fits else [None] * len(saved)
        items = [
            _decode(old, new, shared, f"{path}[{i}]") for i, (old, new) in enumerate(zip(previous, saved, strict=True))
        ]
        return tuple(items) if isinstance(saved, tuple) else items
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: a {type(saved).__name__} is not state")
    if "~shared" in saved:
        if saved["~shared"] not in shared:
            raise ValueError(f"{path}: refers to {saved['~shared']!r}, which this run does not have")
        return shared[saved["~shared"]]
    if "~again" in saved:
        return current
    if "~generator" in saved:
        _expect(current, torch.Generator, path).set_state(saved["~generator"])
        return current
    if "~state_dict" in saved:
        if not hasattr(current, "load_state_dict"):
            raise ValueError(f"{path}: this run has no {path} with a state_dict")
        current.load_state_dict(saved["~state_dict"])
        return current
    if "~object" in saved:
        if current is None or isinstance(current, SCALARS + (torch.Tensor,)):
            raise ValueError(f"{path}: an object in the checkpoint, {type(current).__name__} in this run")
        for name, item in saved["~object"].items():
            if not (isinstance(name, str) and name.isidentifier() and not name.startswith("__")):
                raise ValueError(f"{path}: {name!r} is not an attribute name")
            setattr(current, name, _decode(getattr(current, name, None), item, shared, f"{path}.{name}"))
        return current
    entries: dict = current if isinstance(current, dict) else {}
    return {key: _decode(entries.get(key), item, shared, f"{path}[{key!r}]") for key, item in saved.items()}


def _expect(value: Any, kind: type, path: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{path}: a {kind.__name__} in the checkpoint, {type(value).__name__} in this run")
    return value
