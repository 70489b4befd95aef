"""User-written YAML reads 1e-6 as a number (YAML 1.2), on the command line and in experiment files."""

from __future__ import annotations

from recx.cli import _parse_assignments
from recx.config.run_config import read_yaml_mapping
from recx.core import yaml_values


def test_exponents_without_a_dot_are_floats():
    assert yaml_values.load("[1e-6, -2E+3, 3e4, 1.5e-3, '1e-6', 10, x1e5]") == [
        1e-6,
        -2000.0,
        30000.0,
        1.5e-3,
        "1e-6",
        10,
        "x1e5",
    ]


def test_set_and_files_read_the_same_floats(tmp_path):
    assert _parse_assignments(["sampler_args.smoothing=1e-6", "lr=1e-3"]) == {
        "sampler_args": {"smoothing": 1e-6},
        "lr": 1e-3,
    }
    path = tmp_path / "experiments.yaml"
    path.write_text("experiments:\n  e:\n    defaults: {lr: 1e-3, weight_decay: 0}\n")
    assert read_yaml_mapping(path, "experiments file")["experiments"]["e"]["defaults"] == {
        "lr": 1e-3,
        "weight_decay": 0,
    }
