"""The run settings' command-line options are generated from the configuration (recx.shell.run_options): one flag per
setting, named as its config key, with its declared help, range and default; --set over the flags; one spelling per
setting (an old one is an unknown option, with Click's suggestion)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from recx import api
from recx.config.run_config import HELP, RANGES, RunConfig
from recx.shell import catalog
from recx.shell.run_options import flag


def _help(recx_cli, *command: str) -> str:
    result = recx_cli(*command, "--help")
    assert result.code == 0, result.err
    return "".join(result.out.split())  # help wraps lines, at spaces and after hyphens


def test_every_setting_is_declared_once():
    """Every RunConfig field is declared by recx.config.schema.setting, and HELP, RANGES and the stored catalogue's
    settings (--help's options) are read from those fields: every setting a user chooses has a help there
    (plugin_code is recorded, not chosen), its range the field's, its choices the field's."""
    fields = {field.name: field for field in dataclasses.fields(RunConfig)}
    assert all(set(field.metadata) >= {"help", "range", "choices", "only_when_set"} for field in fields.values())
    assert set(HELP) == set(fields) - {"plugin_code"}
    stored = {setting["key"]: setting for setting in catalog.build()["settings"]}
    assert list(stored) == [key for key in fields if key != "plugin_code"]
    for key, field in fields.items():
        if field.metadata["help"]:
            assert stored[key]["help"] == field.metadata["help"] == HELP[key]
        if field.metadata["range"] is not None:
            assert (
                RANGES[key] is field.metadata["range"] and field.metadata["range"].describe() in stored[key]["accepts"]
            )
        for choice in field.metadata["choices"]:
            assert choice in catalog.build()["choices"][key]


def test_a_new_setting_is_one_line(monkeypatch):
    """A setting added as one field gets its range checked by resolve (the error names key, value and range) and its
    choices checked, with no other table to edit."""
    from recx.config import run_config
    from recx.config.schema import check_values, setting
    from recx.core.args import Range
    from recx.core.errors import RecxError

    @dataclasses.dataclass
    class Extended(RunConfig):
        warmup: int = setting(0, "Warm-up epochs.", range=Range(int, 0, 10))
        mode: str = setting("a", "A mode.", choices=("a", "b"))

    check_values({"warmup": 3, "mode": "b"}, Extended(), "here")
    with pytest.raises(RecxError, match=r"here: warmup = 11: expected .*10"):
        check_values({"warmup": 11}, Extended(), "here")
    with pytest.raises(RecxError, match=r"here: mode 'c'; valid: a, b"):
        check_values({"mode": "c"}, Extended(), "here")
    assert "warmup" in run_config.declared(Extended, "help") and "warmup" not in HELP


def test_train_and_sweep_have_a_flag_per_setting_named_as_its_key(recx_cli):
    train, sweep = _help(recx_cli, "train"), _help(recx_cli, "sweep")
    for key in HELP:
        assert flag(key) in train, key
        assert "".join(HELP[key].rstrip(".").split()) in train, key
        if key not in ("dataset", "seed"):  # a sweep's --dataset and --seeds replace the experiment's lists
            assert flag(key) in sweep, key
    assert "".join(RANGES["dim"].describe().split()) in train and "(default:64)" in train
    assert ",".join(catalog.stored_choices("optimizer")) in train
    assert "--negatives<" not in train and "--k<" not in train


def _config(run) -> dict:
    return yaml.safe_load((run / "config.yaml").read_text())


def test_flags_equal_config_keys_and_set_wins(tiny_root, tmp_path, recx_cli):
    """Generated flags (bool, mapping, a key that had no flag before) make the run a mapping of the same keys makes;
    --set is applied over them, key by key inside a mapping."""
    run = tmp_path / "run"
    result = recx_cli(
        "train",
        *("--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, "--quiet", "--device", "cpu"),
        *("--dim", "8", "--epochs", "1", "--batch-size", "256", "--loss", "bpr", "--n-negatives", "5"),
        *("--lr-step-epochs", "2", "--eval-batch-size", "64", "--valid-metric", "recall@10"),
        *(
            "--sampler",
            "popularity",
            "--sampler-args",
            "{variant: log, smoothing: 0.5}",
            "--set",
            "sampler_args.smoothing=0.75",
        ),
        *("--set", "dim=16", "--ks", "10"),
    )
    assert result.code == 0, result.err
    expected = api.run_config(
        dict(dataset="tiny", device="cpu", dim=16, epochs=1, batch_size=256, loss="bpr", n_negatives=5),
        dict(lr_step_epochs=2, eval_batch_size=64, valid_metric="recall@10", sampler="popularity"),
        sampler_args={"variant": "log", "smoothing": 0.75},
    )
    assert _config(run) == expected.to_dict()


def test_a_mapping_flag_must_be_a_mapping(tiny_root, recx_cli):
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--sampler-args", "[1, 2]")
    assert result.code == 1 and "--sampler-args '[1, 2]': expected a YAML mapping" in result.err


@pytest.mark.parametrize(
    "command, old, new",
    [
        (("train", "--n-negatives", "30"), ("--negatives", "20"), "--n-negatives"),
        (("train", "--ks", "20"), ("--k", "10"), "--ks"),
        (("eval", "RUN", "--ks", "20"), ("--k", "10"), "--ks"),
        (("report", "results.parquet", "--out", "OUT"), ("--k", "10"), "--ks"),
        (("diagnose", "sampler", "RUN", "--n-codewords", "16"), ("--codewords", "8"), "--n-codewords"),
        (("prepare", "x", "--format", "synthetic"), ("--min-rating", "4"), "--rating"),
    ],
)
def test_an_old_spelling_is_an_unknown_option_with_a_suggestion(tmp_path, recx_cli, command, old, new):
    """One spelling per setting: the old one (alone or beside the new one) is refused by Click before anything runs,
    with its suggestion of the option meant; nothing is written."""
    args = [str(tmp_path / arg) if arg in ("RUN", "OUT") else arg for arg in command]
    result = recx_cli(*args, *old, "--data-root", tmp_path / "d")
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert f"No such option: {old[0]}" in result.err and new in result.err.split(f"No such option: {old[0]}")[1]
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_flag_forces_its_key_as_set_does(tmp_path, recx_cli):
    """`recx sweep --epochs 3` plans the runs `--set epochs=3` plans (the same run ids), not the experiment's."""
    experiments = Path(__file__).resolve().parents[1] / "experiments.yaml"
    plan = lambda *args: recx_cli("sweep", experiments, "-e", "quickstart", "--dry-run", "--data-root", tmp_path, *args)  # noqa: E731
    flagged, forced, plain = plan("--epochs", "3"), plan("--set", "epochs=3"), plan()
    assert flagged.code == forced.code == plain.code == 0, flagged.err
    assert flagged.out == forced.out and flagged.out != plain.out
