"""Run folders and datasets under concurrent use, Ctrl-C, --force and damaged files."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from safety_helpers import assert_user_error, snapshot

from recx.runs import store

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "5", "--quiet", "--device", "cpu"]
REPO = Path(__file__).resolve().parents[1]


def train(recx_cli, tiny_root, run, *extra):
    return recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, *extra)


@pytest.fixture
def holder():
    """Start a second process that holds `exclusive(path, what)` until the test ends; yields (start, pid)."""
    processes = []

    def start(lock_path: Path, what: str) -> int:
        code = textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from recx.core.lock import exclusive
            with exclusive(Path({str(lock_path)!r}), {what!r}):
                print("held", flush=True)
                time.sleep(60)
        """)
        process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
        )
        assert process.stdout.readline().strip() == "held"
        processes.append(process)
        return process.pid

    yield start
    for process in processes:
        process.kill()
        process.wait()


def test_a_run_held_by_another_process_is_refused(tiny_root, tmp_path, recx_cli, holder):
    run = tmp_path / "runs" / "r1"
    pid = holder(run.parent / ".r1.lock", "run r1")
    before = snapshot(tmp_path)
    assert_user_error(train(recx_cli, tiny_root, run), f"run r1 is being written by process {pid}")
    assert snapshot(tmp_path) == before and not run.exists()


def test_a_dataset_held_by_another_process_is_refused(tiny_root, tmp_path, recx_cli, holder):
    pid = holder(tiny_root / ".tiny.lock", "dataset tiny")
    before = snapshot(tmp_path)
    result = recx_cli("prepare", "tiny", "--format", "synthetic", "--data-root", tiny_root, "--force")
    assert_user_error(result, f"dataset tiny is being written by process {pid}")
    assert snapshot(tmp_path) == before


def test_a_crashed_holder_releases_the_lock(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "runs" / "r2"
    code = (
        "import os; from pathlib import Path; from recx.core.lock import exclusive\n"
        f"with exclusive(Path({str(run.parent / '.r2.lock')!r}), 'run r2'): os._exit(9)"
    )
    assert subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}).returncode == 9
    assert train(recx_cli, tiny_root, run).code == 0


def test_existing_dataset_refused_then_replaced_whole_with_force(tiny_root, tmp_path, recx_cli):
    before = snapshot(tmp_path)
    args = ["prepare", "tiny", "--format", "synthetic", "--seed", "3", "--data-root", tiny_root]
    assert_user_error(recx_cli(*args), f"{tiny_root / 'tiny'}: a dataset of that name exists; pass --force")
    assert snapshot(tmp_path) == before
    old_train = pd.read_parquet(tiny_root / "tiny" / "train.parquet")
    assert recx_cli(*args, "--force").code == 0
    assert not old_train.equals(pd.read_parquet(tiny_root / "tiny" / "train.parquet"))
    assert sorted(p.name for p in tiny_root.iterdir()) == ["tiny"]  # no lock file after the command


def test_stale_temporary_folders_of_dead_processes_are_cleaned(tiny_root, tmp_path, recx_cli):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tiny_root / f".tiny.tmp-{dead.pid}-0123abcd"
    stale.mkdir()
    (stale / "train.parquet").write_text("half")
    legacy = tiny_root / ".tiny.tmp-89abcdef"  # a killed prepare of an older recx (no pid in the name)
    legacy.mkdir()
    alive = tiny_root / f".tiny.tmp-{os.getpid()}-fedcba98"  # a live process's: not ours to delete
    alive.mkdir()
    unrelated = [tiny_root / ".other.tmp-1-0123abcd", tiny_root / "notes.tmp-1-0123abcd"]
    for path in unrelated:
        path.mkdir()
    assert recx_cli("prepare", "tiny", "--format", "synthetic", "--data-root", tiny_root, "--force").code == 0
    assert not stale.exists() and not legacy.exists() and alive.exists()
    assert all(path.exists() for path in unrelated)


def test_completed_run_refused_then_replaced_with_force(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "run"
    assert train(recx_cli, tiny_root, run).code == 0
    first = pd.read_parquet(run / "results.parquet")
    before = snapshot(tmp_path)
    assert_user_error(train(recx_cli, tiny_root, run), "run run is already complete", "pass --force")
    assert_user_error(train(recx_cli, tiny_root, run, "--lr", "0.01"), "run run is already complete")
    assert snapshot(tmp_path) == before
    assert train(recx_cli, tiny_root, run, "--force").code == 0
    pd.testing.assert_frame_equal(first, pd.read_parquet(run / "results.parquet"))
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".run")]  # no lock or temporary folder


def _interrupt_at(monkeypatch, target: str, after_calls: int = 0):
    """Make `recx.runs.train_run.<target>` raise KeyboardInterrupt on call number after_calls + 1."""
    import recx.runs.train_run as trainer

    real = getattr(trainer, target) if "." not in target else None
    calls = {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, target, interrupted)


def test_ctrl_c_in_training_keeps_an_incomplete_run_that_a_rerun_restarts(tiny_root, tmp_path, recx_cli, monkeypatch):
    run = tmp_path / "run"
    import recx.runs.train_run as trainer

    real_log = trainer.store.log_epoch
    state = {"n": 0}

    def log_then_interrupt(folder, record):
        real_log(folder, record)
        state["n"] += 1
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(trainer.store, "log_epoch", log_then_interrupt)
        result = train(recx_cli, tiny_root, run)
    assert_user_error(
        result, "interrupted: training of run run after 1 epochs", "marked incomplete", "restarts it", code=130
    )
    assert store.state(run) == "incomplete" and (run / "INCOMPLETE").is_file()
    assert store.epochs_recorded(run) == 1 and not (run / "model.pt").exists()
    assert_user_error(recx_cli("eval", run), "is not a completed run")
    assert train(recx_cli, tiny_root, run).code == 0
    assert store.state(run) == "complete" and store.epochs_recorded(run) == 2
    assert not (run / "INCOMPLETE").exists()


def test_ctrl_c_in_evaluation_keeps_the_weights(tiny_root, tmp_path, recx_cli, monkeypatch):
    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        _interrupt_at(patch, "_evaluate_splits")
        result = train(recx_cli, tiny_root, run)
    assert_user_error(
        result, "interrupted: evaluation of run run", "kept its weights and 2 epochs", f"recx eval {run}", code=130
    )
    assert store.state(run) == "trained" and (run / "model.pt").is_file()
    weights = (run / "model.pt").read_bytes()
    assert recx_cli("eval", run, "--ks", "10").code == 0
    assert train(recx_cli, tiny_root, run).code == 0  # finishes the evaluation from the saved weights
    assert store.state(run) == "complete" and (run / "model.pt").read_bytes() == weights
    assert store.epochs_recorded(run) == 2


def test_ctrl_c_during_force_leaves_the_previous_run_unchanged(tiny_root, tmp_path, recx_cli, monkeypatch):
    run = tmp_path / "run"
    assert train(recx_cli, tiny_root, run).code == 0
    before = snapshot(tmp_path)
    with monkeypatch.context() as patch:
        _interrupt_at(patch, "_evaluate_splits")
        result = train(recx_cli, tiny_root, run, "--force")
    assert_user_error(result, f"the previous run in {run} is unchanged", code=130)
    assert snapshot(tmp_path) == before


def test_plain_ctrl_c_says_nothing_half_written_was_kept(tmp_path, recx_cli, monkeypatch):
    import recx.data.prepare as prepare_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "_prepare_locked", interrupted)
    result = recx_cli("prepare", "x", "--format", "synthetic", "--data-root", tmp_path / "d")
    assert_user_error(result, "interrupted: recx prepare; nothing half-written was kept", code=130)
    assert not list((tmp_path / "d").iterdir())


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda run: (run / "model.pt").write_bytes((run / "model.pt").read_bytes()[:100]), "model.pt: truncated"),
        (lambda run: (run / "model.pt").unlink(), "model.pt: missing; the run folder is damaged"),
        (lambda run: (run / "config.yaml").write_bytes(b"\xff\xfe: [unclosed"), "config.yaml: unreadable or not valid"),
        (lambda run: (run / "config.yaml").write_text("lr: [unclosed"), "config.yaml: unreadable or not valid YAML"),
        (lambda run: (run / "config.yaml").unlink(), "config.yaml: missing"),
        (lambda run: (run / "environment.json").write_text("{"), "environment.json: unreadable"),
    ],
)
def test_eval_of_a_damaged_run_names_the_file(tiny_root, tmp_path, recx_cli, damage, expected):
    run = tmp_path / "run"
    assert train(recx_cli, tiny_root, run).code == 0
    damage(run)
    before = snapshot(tmp_path)
    assert_user_error(recx_cli("eval", run), expected)
    assert snapshot(tmp_path) == before


def test_internal_error_prints_one_line_and_saves_the_traceback(tiny_root, tmp_path, recx_cli, monkeypatch):
    import recx.runs.train_run as trainer

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(trainer, "fit", broken)
    run = tmp_path / "run"
    result = train(recx_cli, tiny_root, run)
    assert_user_error(result, "internal error: ValueError: boom", f"full traceback in {run / 'error.log'}", "--debug")
    assert "Traceback" in (run / "error.log").read_text() and store.state(run) == "incomplete"
    with pytest.raises(ValueError, match="boom"):
        train(recx_cli, tiny_root, tmp_path / "run2", "--debug")


def test_second_train_is_refused_and_a_killed_holder_leaves_a_restartable_run(tiny_root, tmp_path, recx_cli):
    """Real processes: the first trains (slowed after its first epoch), the second is refused at once with the
    holder's pid; after kill -9 of the first, the same command restarts the run and completes it."""
    run = tmp_path / "run"
    args = ["train", "--dataset", "tiny", "--data-root", str(tiny_root), "--run-dir", str(run), *FAST]
    slowed = (
        "import sys, time\nimport recx.runs.train_run as t\nreal = t.store.log_epoch\n"
        "t.store.log_epoch = lambda *a: (real(*a), time.sleep(120))\n"
        f"sys.argv = ['recx'] + {args!r}\nfrom recx.cli import main\nmain()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", slowed], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (run / "epochs.jsonl").exists() and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-m", "recx", *args], env=env, capture_output=True, text=True)
        assert second.returncode == 1 and f"run run is being written by process {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.kill()
        first.wait()
    assert store.state(run) == "incomplete"
    assert recx_cli(*args).code == 0 and store.state(run) == "complete" and store.epochs_recorded(run) == 2


def test_failed_download_does_not_claim_a_kept_part(tmp_path):
    from recx.core.errors import RecxError
    from recx.data.download import _fetch

    with pytest.raises(RecxError) as error:
        _fetch("http://127.0.0.1:9/ml-1m.zip", tmp_path / "ml-1m.zip")
    assert "nothing was downloaded; check the network connection" in str(error.value)
    assert ".part" not in str(error.value) and not any(tmp_path.iterdir())


def test_a_failed_run_in_a_folder_it_did_not_create_leaves_the_folder_as_it_was(
    tiny_root, tmp_path, recx_cli, train_tiny
):
    run = tmp_path / "mine"
    run.mkdir()
    result = train_tiny(
        run,
        "--loss",
        "bpr",
        "--lr",
        "1e30",
        "--epochs",
        "3",
        "--quiet",
        "--device",
        "cpu",
    )
    assert_user_error(result, "the loss became nan")
    assert run.is_dir() and not any(run.iterdir())


def test_sweep_interrupted_in_evaluation_finishes_that_run_without_training_it_again(tmp_path, recx_cli, monkeypatch):
    import yaml

    spec = {
        "datasets": {
            "tiny": {
                "format": "synthetic",
                "ratios": "80/10/10",
                "synthetic": {"n_users": 60, "n_items": 40, "mean_length": 8},
            }
        },
        "experiments": {
            "two": {
                "datasets": ["tiny"],
                "seeds": [0, 1],
                "ks": [5],
                "defaults": {"dim": 4, "epochs": 2, "batch_size": 64, "device": "cpu"},
                "methods": {"bpr": {"loss": "bpr", "n_negatives": 2}},
            }
        },
    }
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    args = ["sweep", path, "-e", "two", "--out", tmp_path / "out", "--data-root", tmp_path / "data"]
    with monkeypatch.context() as patch:
        _interrupt_at(patch, "_evaluate_splits")
        assert_user_error(recx_cli(*args), "interrupted: evaluation of run", "kept its weights", code=130)
    (trained,) = [p for p in (tmp_path / "out" / "runs").iterdir() if p.is_dir()]
    epochs = (trained / "epochs.jsonl").read_text()
    assert store.state(trained) == "trained"
    result = recx_cli(*args)
    assert result.code == 0 and "2 runs, 0 already complete" in result.out
    assert store.state(trained) == "complete" and (trained / "epochs.jsonl").read_text() == epochs


def test_force_never_replaces_a_folder_that_is_not_a_dataset(tiny_root, tmp_path, recx_cli):
    mine = tiny_root / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a dataset")
    before = snapshot(tmp_path)
    result = recx_cli("prepare", "mine", "--format", "synthetic", "--data-root", tiny_root, "--force")
    assert_user_error(result, f"{mine}: a folder (not a prepared dataset) of that name exists; recx does not replace")
    assert snapshot(tmp_path) == before


def test_force_never_replaces_a_folder_with_a_config_yaml_that_recx_did_not_mark(tiny_root, tmp_path, recx_cli):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("lr: 0.1\n")
    before = snapshot(tmp_path)
    assert_user_error(train(recx_cli, tiny_root, mine, "--force"), "is not a run folder")
    assert snapshot(tmp_path) == before
