"""What a user sees: per-epoch lines on a pipe, unwrapped tables, `recx list` and `--help` from the registries."""

import re

import pytest
from safety_helpers import assert_user_error

from recx.data.formats.registry import FORMATS
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--negatives", "5", "--device", "cpu"]


def test_piped_training_prints_one_line_per_epoch_and_unwrapped_tables(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "a-run-folder-with-a-rather-long-name-so-that-the-title-passes-eighty-columns"
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST)
    assert result.code == 0, result.err
    assert "; defaults for softmax: model_args.scoring=cosine, model_args.temperature=0.1;" in " ".join(
        result.out.split()
    )
    epochs = [line for line in result.out.splitlines() if re.match(r"softmax\+uniform epoch \d/2: loss ", line)]
    assert len(epochs) == 2 and "valid ndcg@20" in epochs[0]
    row = next(line for line in result.out.splitlines() if "ndcg@10" in line)
    assert len(re.findall(r"\d\.\d{4}", row)) == 4
    assert any(str(run) in line and len(line) > 80 for line in result.out.splitlines())
    topk = tmp_path / "top.parquet"
    result = recx_cli("eval", run, "--k", "5", "--dump-topk", topk)
    assert result.code == 0 and f"top-5 lists (user, item, rank) of every user with a test item: {topk}" in result.out
    assert str(run / "eval_test.parquet") in result.out


def test_quiet_training_prints_only_the_table(tiny_root, tmp_path, recx_cli):
    result = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "r", *FAST, "--quiet"
    )
    assert result.code == 0 and " epoch 1/2" not in result.out and "ndcg@10" in result.out


@pytest.mark.parametrize(
    "kind, registry", [("losses", LOSSES), ("samplers", SAMPLERS), ("models", MODELS), ("formats", FORMATS)]
)
def test_list_shows_every_registered_name_with_module_and_defaults(recx_cli, kind, registry):
    result = recx_cli("list", kind)
    assert result.code == 0, result.err
    for name in registry.names():
        assert re.search(rf"^│ {re.escape(name)} +│ {re.escape(registry.get(name).__module__)} ", result.out, re.M)


def test_list_metrics_experiments_and_arguments(recx_cli):
    losses = recx_cli("list", "losses").out
    assert "temperature=1.0 (> 0), logq_correction=True" in losses and "logQ-corrected" in losses
    assert "exclude_train=" in recx_cli("list", "samplers").out
    metrics = recx_cli("list", "metrics").out
    assert all(name in metrics for name in ("ndcg", "recall", "precision", "mrr", "hitrate", "opauc"))
    assert "quickstart" in recx_cli("list", "experiments").out
    assert_user_error(recx_cli("list", "nope"), "recx list 'nope': expected one of samplers, losses")


def test_train_help_names_every_method_and_shows_defaults(recx_cli):
    result = recx_cli("train", "--help")
    text = re.sub(r"[│\s]+", " ", result.out)
    for name in LOSSES.names() + SAMPLERS.names() + MODELS.names():
        assert name in text
    assert "(default: 64)" in text and "(default: softmax)" in text and "--n-negatives" in text
