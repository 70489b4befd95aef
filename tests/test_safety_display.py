"""What a user sees: per-epoch lines on a pipe, unwrapped tables, `recx list` and `--help` from the registries."""

import re

import pytest
from safety_helpers import assert_user_error

from recx.data.formats.registry import FORMATS
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "5", "--device", "cpu"]


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
    result = recx_cli("eval", run, "--ks", "5", "--dump-topk", topk)
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


def test_piped_output_gets_a_plain_progress_line_at_a_steady_interval(tiny_root, tmp_path, recx_cli, monkeypatch):
    """Output sent to a file (CI, nohup, a cluster job) showed no progress within an epoch, only its header line
    (issue 46, item 6); now a plain line at a steady interval says the step, epoch, rate and time left. The interval
    is the test's (0 s: every update), so nothing here depends on the machine's speed."""
    from recx.core import progress

    monkeypatch.setattr(progress, "PLAIN_INTERVAL_S", 0.0)
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "r", *FAST)
    assert result.code == 0, result.err
    lines = [line for line in result.out.splitlines() if ": step " in line]
    assert lines, result.out
    assert any(line.startswith("softmax+uniform epoch 2/2: step ") for line in lines), lines
    assert all(" elapsed" in line and " left" in line and "%)" in line for line in lines), lines
    quiet = recx_cli(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "q", *FAST, "--quiet"
    )
    assert quiet.code == 0 and ": step " not in quiet.out


def test_a_task_whose_total_is_not_known_yet_shows_no_none(monkeypatch):
    import io

    from rich.console import Console

    from recx.core import progress

    monkeypatch.setattr(progress, "PLAIN_INTERVAL_S", 0.0)
    out = io.StringIO()
    shown = progress.RunProgress(console=Console(file=out, width=200))
    task = shown.add_task("evaluating test", total=None, status="")
    column = progress.CountColumn()
    assert str(column.render(shown.tasks[0])) == "0"  # was "0/None"
    shown.update(task, completed=512, total=2000)
    assert str(column.render(shown.tasks[0])) == "512/2,000"
    assert "evaluating test: 512/2,000 (26%)" in out.getvalue() and "None" not in out.getvalue()


def test_each_epoch_shows_its_own_time_left(monkeypatch):
    """The bar's count restarts each epoch; its rate and "about T left" did not (from the second epoch on a piped
    log said "about 0:00:00 left" all epoch). With a clock the test moves: 100 steps in 10 s, then the next epoch's
    first 50 steps in 5 s leave about 5 s."""
    import io

    from rich.console import Console

    from recx.core import progress
    from recx.training.fit import start_epoch

    now = {"t": 0.0}
    shown = progress.RunProgress(console=Console(file=io.StringIO(), width=200))
    shown.get_time = lambda: now["t"]
    task = shown.add_task("mf", total=100, status="", unit="step")
    for epoch in (1, 2):
        start_epoch(shown, task, f"mf epoch {epoch}/2", 0)
        for step in range(1, 101 if epoch == 1 else 51):
            now["t"] += 0.1
            shown.update(task, completed=step)
    line = progress.plain_line(shown.tasks[0])
    assert line.startswith("mf epoch 2/2: step 50/100 (50%)") and "unit" not in line, line
    assert "0:00:05 elapsed" in line and "about 0:00:05 left" in line, line
