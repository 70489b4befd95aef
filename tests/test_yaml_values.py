"""User-written YAML reads 1e-6 as a number (YAML 1.2), on the command line and in experiment files."""

from __future__ import annotations

import pytest
import yaml

from recx.config.run_config import read_yaml_mapping
from recx.core import yaml_values
from recx.core.errors import RecxError
from recx.shell.run_options import assignments as _parse_assignments


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


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, recx_cli):
    """Two methods of one name in an experiments file: the later silently won (issue 37, item 5)."""
    path = tmp_path / "experiments.yaml"
    path.write_text(
        "experiments:\n  e:\n    datasets: [tiny]\n    methods:\n      bpr: {loss: bpr}\n      bpr: {loss: softmax}\n"
    )
    result = recx_cli("sweep", path, "--experiment", "e", "--dry-run", "--out", tmp_path / "out")
    assert result.code == 1, result.out
    assert f"{path}: not valid YAML (key 'bpr' is given twice in one mapping, at lines 5 and 6" in result.err
    assert not (tmp_path / "out").exists()
    with pytest.raises(yaml.YAMLError, match="key 'a' is given twice in one mapping, at lines 1 and 1"):
        yaml_values.load("{a: 1, b: 2, a: 3}")


def test_merge_keys_and_overrides_are_not_repeated_keys():
    loaded = yaml_values.load("base: &b {lr: 0.1, dim: 8}\nrun:\n  <<: *b\n  lr: 0.2\n")
    assert loaded["run"] == {"lr": 0.2, "dim": 8}


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_an_alias_bomb_is_refused_naming_the_file(tmp_path):
    """Nine levels of ten aliases: 10^9 values a check or a message would walk for ever (issue 37, item 5)."""
    path = tmp_path / "experiments.yaml"
    path.write_text(LAUGHS + "experiments:\n  e:\n    methods: {m: {sampler_args: {exclude_train: *i}}}\n")
    with pytest.raises(
        RecxError,
        match=rf"^{path}: not valid YAML \(its aliases expand it to 2,345,679,031 values, more than the 100,000 recx reads",
    ):
        read_yaml_mapping(path, "experiments file")
    with pytest.raises(yaml.YAMLError, match="an alias refers to a value that contains it"):
        yaml_values.load("a: &a [1, *a]")
    few = yaml_values.load(LAUGHS.split("c:")[0] + "copies: [*b, *b]\n")
    assert few["copies"][1] == [["x"] * 10] * 10
