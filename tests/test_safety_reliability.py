"""Issue 26 "Reliability II": each case a demanding user tried, as a test that failed on the recx before the fix."""

import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from safety_helpers import assert_user_error, snapshot

from recx.core.errors import Interrupted, RecxError
from recx.data.prepare import PrepareOptions, prepare
from recx.runs import store

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "5", "--quiet", "--device", "cpu"]


def train(recx_cli, root, run, *extra, dataset="tiny"):
    return recx_cli("train", "--dataset", dataset, "--data-root", root, "--run-dir", run, *FAST, *extra)


@pytest.fixture
def run(tiny_root, tmp_path, recx_cli):
    folder = tmp_path / "run"
    assert train(recx_cli, tiny_root, folder).code == 0
    return folder


def disk_full(monkeypatch, after_bytes: bytes = b"PAR1 half"):
    """DataFrame.to_parquet writes a part of the file, then fails as on a full disk."""

    def full(self, path, *args, **kwargs):
        Path(path).write_bytes(after_bytes)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)


# 1. A line that does not fit the format is refused with its number, never re-read with shifted columns.


@pytest.mark.parametrize("line", ["1\t10\t4.0\t100\t0", "1\t10\t4.0\t100\t0\t7"])
def test_prepare_refuses_lines_of_more_fields_than_the_format_has(tmp_path, recx_cli, line):
    source = tmp_path / "five.tsv"
    source.write_text("".join(f"{line.replace('1', str(u), 1)}\n" for u in range(1, 81)))
    result = recx_cli("prepare", "five", "--format", "triplets", "--source", source, "--data-root", tmp_path / "d")
    assert_user_error(result, "five.tsv, line 1: expected 2 to 4 fields", f"got {line.count(chr(9)) + 1}")
    assert not (tmp_path / "d" / "five").exists()


def test_prepare_names_the_first_line_of_another_field_count(tmp_path, recx_cli):
    source = tmp_path / "t.txt"
    source.write_text("1 2 5\n2 3 4\n3 4 1 100\n")
    result = recx_cli("prepare", "t", "--format", "triplets", "--source", source, "--data-root", tmp_path / "d")
    assert_user_error(result, "t.txt, line 3: expected 3 fields")


# 2. recx writes only to paths it created (or that it created before); anything else needs --force.


def test_dump_topk_never_replaces_a_file_recx_did_not_write(run, tmp_path, recx_cli):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    before = snapshot(tmp_path)
    assert_user_error(
        recx_cli("eval", run, "--dump-topk", notes), f"--dump-topk {notes}: a file recx did not write", "--force"
    )
    assert snapshot(tmp_path) == before and notes.read_text() == "my notes"
    assert_user_error(recx_cli("eval", run, "--dump-topk", tmp_path), f"--dump-topk {tmp_path}: a folder")
    topk = tmp_path / "topk.parquet"
    assert recx_cli("eval", run, "--dump-topk", topk).code == 0
    assert recx_cli("eval", run, "--dump-topk", topk, "--ks", "5").code == 0  # its own file: replaced
    assert pd.read_parquet(topk)["rank"].max() == 5
    assert recx_cli("eval", run, "--dump-topk", notes, "--force").code == 0
    assert len(pd.read_parquet(notes)) > 0


def test_report_never_replaces_report_files_recx_did_not_write(tmp_path, recx_cli):
    spec = {
        "datasets": {
            "tiny": {
                "format": "synthetic",
                "ratios": "80/10/10",
                "synthetic": {"n_users": 60, "n_items": 40, "mean_length": 8},
            }
        },
        "experiments": {
            "one": {
                "datasets": ["tiny"],
                "seeds": [0],
                "ks": [5],
                "defaults": {"dim": 4, "epochs": 1, "batch_size": 64, "device": "cpu"},
                "methods": {"bpr": {"loss": "bpr", "n_negatives": 2}},
            }
        },
    }
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(spec))
    sweep = recx_cli("sweep", tmp_path / "e.yaml", "-e", "one", "--out", tmp_path / "s", "--data-root", tmp_path / "d")
    assert sweep.code == 0, sweep.err
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("report.md", "table.md"):
        (mine / name).write_text("my own notes")
    before = snapshot(tmp_path)
    args = ["report", tmp_path / "s" / "results.parquet", "--out", mine, "--resamples", "10"]
    assert_user_error(recx_cli(*args), f"--out {mine}: holds report.md, table.md that recx did not write", "--force")
    assert snapshot(tmp_path) == before
    assert recx_cli(*args, "--force").code == 0 and "NDCG" in (mine / "table.md").read_text()
    assert recx_cli(*args).code == 0  # now the folder holds recx's marker: its own report is replaced


# 3. Every artifact's sha256 is recorded and checked; non-finite weights are refused.


def test_weights_overwritten_in_place_are_refused(run, recx_cli):
    weights = bytearray((run / "model.pt").read_bytes())
    weights[1000:5096] = bytes(4096)  # inside the tensors' storage: the file still loads
    (run / "model.pt").write_bytes(bytes(weights))
    torch.load(run / "model.pt")
    assert_user_error(
        recx_cli("eval", run), "model.pt: changed or damaged since recx wrote it", "train the run again with --force"
    )


def test_non_finite_weights_are_refused_and_an_unrecorded_run_is_said_once(run, recx_cli):
    (run / store.CHECKSUMS).unlink()  # as written by an older recx
    result = recx_cli("eval", run)
    assert result.code == 0 and result.err.count("no recorded checksum") <= 1
    state = torch.load(run / "model.pt")
    next(iter(state.values()))[0, :4] = float("nan")
    torch.save(state, run / "model.pt")
    assert_user_error(recx_cli("eval", run), "model.pt: 4 weights are not finite")


def test_a_changed_dataset_split_is_refused(tiny_root, tmp_path, recx_cli):
    path = tiny_root / "tiny" / "train.parquet"
    data = bytearray(path.read_bytes())
    data[100:110] = b"0123456789"
    path.write_bytes(bytes(data))
    assert_user_error(
        train(recx_cli, tiny_root, tmp_path / "r"),
        "train.parquet: changed or damaged",
        "prepare the dataset again with --force",
    )


def test_every_run_artifact_has_its_checksum_recorded(run):
    recorded = json.loads((run / store.CHECKSUMS).read_text())
    assert {"model.pt", "results.parquet", "per_user_test.parquet"} <= set(recorded)
    card = json.loads((run.parent / "data" / "tiny" / "card.json").read_text())
    assert {"train.parquet", "test.parquet", "users.parquet", "items.parquet"} <= set(card["files"])


# 4. Every file is written whole: a failed write keeps the previous file.


def test_a_failed_eval_write_keeps_the_previous_results(run, recx_cli, monkeypatch):
    assert recx_cli("eval", run).code == 0
    before = (run / "eval_test.parquet").read_bytes()
    disk_full(monkeypatch)
    result = recx_cli("eval", run)
    assert_user_error(
        result,
        "eval_test.parquet failed: no space left on device (the file system mounted at",
        "the previous eval_test.parquet, if any, is unchanged",
    )
    assert (run / "eval_test.parquet").read_bytes() == before
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".")) == []


# 5. Method argument ranges are checked before any work, the key named.


@pytest.mark.parametrize(
    "setting, expected",
    [
        ("loss_args.temperature=-1", "loss_args.temperature = -1: expected a finite number > 0"),
        ("loss_args.temperature=0", "loss_args.temperature = 0: expected a finite number > 0"),
        ("sampler_args.max_redraws=-3", "sampler_args.max_redraws = -3: expected an integer in [0, 1,000]"),
        ("model_args.temperature=0", "model_args.temperature = 0: expected a finite number > 0"),
    ],
)
def test_loss_and_sampler_argument_ranges_are_refused_before_work(tiny_root, tmp_path, recx_cli, setting, expected):
    loss = ["--loss", "softmax", "--sampler", "uniform"] if "loss_args" in setting else []
    before = snapshot(tmp_path, strict=True)
    assert_user_error(train(recx_cli, tiny_root, tmp_path / "r", *loss, "--set", setting), expected)
    assert snapshot(tmp_path, strict=True) == before


# 6. Internal errors become messages: what failed, what was kept, what to do.


def test_a_truncated_split_of_an_older_dataset_is_named(tiny_root, tmp_path, recx_cli):
    card_path = tiny_root / "tiny" / "card.json"
    card = json.loads(card_path.read_text())
    del card["files"]  # prepared by an older recx: no checksum to compare
    card_path.write_text(json.dumps(card))
    path = tiny_root / "tiny" / "train.parquet"
    path.write_bytes(path.read_bytes()[:200])
    assert_user_error(
        train(recx_cli, tiny_root, tmp_path / "r"),
        "train.parquet: truncated or not a Parquet file",
        "prepare the dataset again with --force",
    )


def test_a_binary_file_given_to_prepare_is_named(tmp_path, recx_cli):
    source = tmp_path / "blob.bin"
    source.write_bytes(bytes(range(256)) * 20)
    result = recx_cli("prepare", "b", "--format", "triplets", "--source", source, "--data-root", tmp_path / "d")
    assert_user_error(result, "blob.bin")
    assert "internal error" not in result.err


@pytest.mark.parametrize("length", [240, 255, 300])
def test_a_name_too_long_for_the_file_system_is_refused_up_front(tmp_path, recx_cli, length):
    before = snapshot(tmp_path, strict=True)
    result = recx_cli("prepare", "n" * length, "--format", "synthetic", "--data-root", tmp_path)
    assert_user_error(result, f"is {length} characters long; expected at most 200")
    assert snapshot(tmp_path, strict=True) == before


def test_a_write_failure_during_train_is_one_message(tiny_root, tmp_path, recx_cli, monkeypatch):
    disk_full(monkeypatch)
    result = train(recx_cli, tiny_root, tmp_path / "r")
    assert_user_error(
        result, "results.parquet failed: no space left on device (the file system mounted at", "run the same command"
    )
    assert "internal error" not in result.err


def test_a_failed_weights_write_is_one_message(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", broken)
    tmp_path.joinpath("run").mkdir()
    with pytest.raises(RecxError, match="model.pt failed .*unexpected pos.* Free some space"):
        store.save_weights(torch.nn.Linear(2, 2), tmp_path / "run")
    assert not any((tmp_path / "run").iterdir())


# 7. No stuck states.


def test_force_replaces_a_dataset_of_its_own_whose_card_was_deleted(tiny_root, recx_cli):
    (tiny_root / "tiny" / "card.json").unlink()
    args = ["prepare", "tiny", "--format", "synthetic", "--data-root", tiny_root]
    assert_user_error(recx_cli(*args), "a damaged dataset of that name exists (its card.json is missing)", "--force")
    assert recx_cli(*args, "--force").code == 0
    assert (tiny_root / "tiny" / "card.json").is_file()


def test_a_refused_command_leaves_no_new_lock(tiny_root, tmp_path, recx_cli):
    mine = tiny_root / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a dataset")
    before = snapshot(tmp_path, strict=True)
    assert_user_error(
        recx_cli("prepare", "mine", "--format", "synthetic", "--data-root", tiny_root, "--force"),
        "a folder (not a prepared dataset)",
    )
    assert snapshot(tmp_path, strict=True) == before
    before = snapshot(tmp_path)
    assert_user_error(train(recx_cli, tiny_root, mine), "is not a run folder recx wrote")
    assert snapshot(tmp_path) == before and not (tiny_root / ".mine.lock").exists()


def test_ctrl_c_of_a_parallel_sweep_names_the_runs_it_kept():
    from recx.sweeps.drive import drive
    from recx.sweeps.task import RunTask

    class Backend:
        capacity = 2

        def start(self, task):
            return task.run_id

        def poll(self, timeout):
            raise KeyboardInterrupt

        def close(self):
            pass

    tasks = [
        RunTask(config={}, folder=f"/nonexistent/r{i}", data_root="", ks=[10], method="m", log="") for i in range(2)
    ]
    with pytest.raises(KeyboardInterrupt) as interrupted:
        drive(tasks, Backend(), lambda *args: None)
    assert isinstance(interrupted.value, Interrupted)
    message = str(interrupted.value)
    assert "2 runs in progress were stopped (r0, r1)" in message and "marked incomplete" in message
    assert "nothing half-written" not in message


def test_train_chooses_its_cut_offs_for_a_small_catalogue(tmp_path, recx_cli):
    root = tmp_path / "data"
    prepare(
        "small",
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": 100, "n_items": 40, "mean_length": 8}
        ),
        root,
    )
    assert_user_error(
        train(recx_cli, root, tmp_path / "a", dataset="small"), "K=50 is larger than the number of items (40)", "--ks"
    )
    assert train(recx_cli, root, tmp_path / "b", "--ks", "10,20", dataset="small").code == 0
    results = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert sorted(results.k.unique()) == [10, 20]
