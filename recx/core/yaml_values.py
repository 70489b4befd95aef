"""YAML as recx reads what a user writes (`--set` values, config and experiment files): PyYAML's safe loader with
YAML 1.2's floats, so that 1e-6 or 2E+3 (an exponent without a dot) is a number, not the string YAML 1.1 makes of it."""

from __future__ import annotations

import re

import yaml


class Loader(yaml.SafeLoader):
    """The safe loader, plus the floats YAML 1.2 writes without a dot."""


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def load(text: str):
    return yaml.load(text, Loader=Loader)
