"""A dataset's identity is its content (issue 37, item 1): the data hash comes from the splits' columns and the id
maps in a canonical encoding, so Parquet files written by another pyarrow (other bytes, same values) keep the
identity, and runs trained on them stay resumable and evaluable; the per-file sha256 stays for damage checks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.data.dataset import load_dataset
from recx.data.dataset_folder import IDENTITY, sha256_of
from recx.runs import store
from recx.runs.evaluate import open_saved_run
from recx.runs.train_run import train_run
from tests.test_resume import count_epochs, killed_after_checkpoint

CONFIG = {"seed": 3, "dim": 8, "epochs": 3, "patience": 3, "device": "cpu", "model": "mf", "loss": "bpr"}


def rewrite(folder: Path, change=None) -> None:
    """Write every Parquet file of the dataset again with other writer options (other bytes, as another pyarrow
    writes them), `change` applied to the tables first, and record the new files' sha256 in card.json."""
    card_path = folder / "card.json"
    card = json.loads(card_path.read_text())
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path)
        if change is not None:
            table = change(path.stem, table)
        pq.write_table(table, path, compression="snappy", use_dictionary=True, row_group_size=7)
        card["files"][path.name] = sha256_of(path)
    card_path.write_text(json.dumps(card))


def test_other_parquet_bytes_of_the_same_values_keep_the_identity(tiny_root):
    before = load_dataset(tiny_root, "tiny")
    files_before = json.loads((tiny_root / "tiny" / "card.json").read_text())["files"]
    rewrite(tiny_root / "tiny")
    after = load_dataset(tiny_root, "tiny")
    assert json.loads((tiny_root / "tiny" / "card.json").read_text())["files"] != files_before
    assert after.file_hash != before.file_hash
    assert after.data_hash == before.data_hash


@pytest.mark.parametrize("which", ["train", "test", "items"])
def test_a_changed_value_changes_the_identity(tiny_root, which):
    import pyarrow as pa

    before = load_dataset(tiny_root, "tiny").data_hash

    def change(stem, table):
        if stem != which:
            return table
        column = "id" if which == "items" else "item"
        values = table.column(column).to_pylist()
        values[0] = "x" if which == "items" else (values[0] + 1) % 100
        return table.set_column(
            table.column_names.index(column), column, pa.array(values, table.schema.field(column).type)
        )

    rewrite(tiny_root / "tiny", change)
    assert load_dataset(tiny_root, "tiny").data_hash != before


def test_a_split_saved_again_with_the_same_content_is_accepted_with_a_note(tiny_root, capsys, recx_cli):
    """A user's pipeline saves the splits again (other compression, pandas' int64 and index column, unchanged
    values): the card's sha256 differs, its content hash does not (issue 46, item 5: this was refused as "changed or
    damaged ... prepare the dataset again with --force")."""
    import pandas as pd

    folder = tiny_root / "tiny"
    before = load_dataset(tiny_root, "tiny")
    card = json.loads((folder / "card.json").read_text())
    assert card["content_hash"] == before.data_hash and card["identity"] == IDENTITY
    pq.write_table(pq.read_table(folder / "train.parquet"), folder / "train.parquet", compression="snappy")
    pd.read_parquet(folder / "test.parquet").astype("int64").to_parquet(folder / "test.parquet", compression="gzip")
    capsys.readouterr()
    after = load_dataset(tiny_root, "tiny")
    assert after.data_hash == before.data_hash and after.file_hash != before.file_hash
    note = " ".join(capsys.readouterr().err.split())
    assert f"note: {folder}: train.parquet, test.parquet were written again since recx prepared the dataset" in note
    assert f"recx prepare tiny --data-root {tiny_root} --refresh-checksums" in note
    refreshed = recx_cli("prepare", "tiny", "--data-root", tiny_root, "--refresh-checksums")
    assert refreshed.code == 0, refreshed.err
    assert "the checksums of test.parquet, train.parquet recorded anew" in " ".join(refreshed.err.split())
    files = json.loads((folder / "card.json").read_text())["files"]
    assert (
        files["train.parquet"] == sha256_of(folder / "train.parquet")
        and files["users.parquet"] == (card["files"]["users.parquet"])
    )
    load_dataset(tiny_root, "tiny")
    assert "written again" not in capsys.readouterr().err  # the card describes the files again: no note
    assert (
        "every checksum already matches"
        in recx_cli("prepare", "tiny", "--data-root", tiny_root, "--refresh-checksums").err
    )
    absent = recx_cli("prepare", "other", "--data-root", tiny_root, "--refresh-checksums")
    assert absent.code == 1 and "no prepared dataset 'other' under" in absent.err
    assert not list(tiny_root.glob(".other*"))  # not even a lock file
    refused = recx_cli("prepare", "tiny", "--data-root", tiny_root, "--refresh-checksums", "--format", "synthetic")
    assert (
        refused.code == 1
        and "--refresh-checksums records the checksums of an existing dataset's files; not with --format" in refused.err
    )


def test_a_changed_value_or_damaged_bytes_are_still_refused(tiny_root, recx_cli):
    import pyarrow as pa

    folder = tiny_root / "tiny"
    original = (folder / "train.parquet").read_bytes()
    table = pq.read_table(folder / "train.parquet")
    items = table.column("item").to_pylist()
    items[0] = (items[0] + 1) % 100
    pq.write_table(table.set_column(1, "item", pa.array(items, pa.int32())), folder / "train.parquet")
    with pytest.raises(
        RecxError, match=r"train\.parquet: changed or damaged since recx wrote it \(its sha256 and the "
    ):
        load_dataset(tiny_root, "tiny")
    refused = recx_cli("prepare", "tiny", "--data-root", tiny_root, "--refresh-checksums")
    assert refused.code == 1 and "train.parquet: changed or damaged" in refused.err
    data = bytearray(original)
    data[100:110] = b"0123456789"
    (folder / "train.parquet").write_bytes(bytes(data))
    with pytest.raises(RecxError, match=r"train\.parquet: changed or damaged since recx wrote it"):
        load_dataset(tiny_root, "tiny")


def test_a_card_without_a_content_hash_refuses_other_bytes_as_before(tiny_root):
    """A dataset prepared before the card recorded its content hash cannot tell re-saved bytes from changed data."""
    folder = tiny_root / "tiny"
    card = json.loads((folder / "card.json").read_text())
    del card["content_hash"], card["identity"]
    (folder / "card.json").write_text(json.dumps(card))
    path = folder / "train.parquet"
    pq.write_table(pq.read_table(path), path, compression="snappy")
    with pytest.raises(RecxError, match=r"train\.parquet: changed or damaged since recx wrote it \(its sha256 differs"):
        load_dataset(tiny_root, "tiny")


def test_a_run_resumes_and_evaluates_on_its_data_written_by_another_writer(tiny_root, tmp_path, monkeypatch):
    config = resolve({**CONFIG, "dataset": "tiny"})
    tiny = load_dataset(tiny_root, "tiny")
    killed_after_checkpoint(config, tiny, tmp_path / "run", monkeypatch, 1)
    environment = json.loads((tmp_path / "run" / "environment.json").read_text())
    assert environment["data_identity"] == IDENTITY and environment["data_hash"] == tiny.data_hash
    rewrite(tiny_root / "tiny")
    trained = count_epochs(monkeypatch)
    train_run(config, load_dataset(tiny_root, "tiny"), tmp_path / "run")
    assert trained == [2, 3] and store.state(tmp_path / "run") == "complete"
    rewrite(tiny_root / "tiny")
    open_saved_run(tmp_path / "run", tiny.train.indptr.device, tiny_root)


def as_written_before(run: Path, dataset) -> None:
    """environment.json as a recx before content identity wrote it: the files' byte hash, no `data_identity`."""
    path = run / "environment.json"
    environment = json.loads(path.read_text())
    del environment["data_identity"]
    environment["data_hash"] = dataset.file_hash
    path.write_text(json.dumps(environment))


def test_a_run_written_before_content_identity_resumes_on_its_files_or_a_re_prepare(
    tiny_root, tmp_path, monkeypatch, capsys
):
    config = resolve({**CONFIG, "dataset": "tiny"})
    tiny = load_dataset(tiny_root, "tiny")
    killed_after_checkpoint(config, tiny, tmp_path / "run", monkeypatch, 1)
    as_written_before(tmp_path / "run", tiny)
    assert store.trained_on(tmp_path / "run", tiny)
    assert "taken as the same data" not in capsys.readouterr().err
    rewrite(tiny_root / "tiny")
    again = load_dataset(tiny_root, "tiny")
    assert store.trained_on(tmp_path / "run", again)
    assert "same card (source, parameters, counts): taken as the same data" in capsys.readouterr().err
    train_run(config, again, tmp_path / "run")
    assert store.state(tmp_path / "run") == "complete"


def test_a_run_written_before_content_identity_on_other_data_is_refused(tiny_root, tmp_path, monkeypatch):
    config = resolve({**CONFIG, "dataset": "tiny"})
    tiny = load_dataset(tiny_root, "tiny")
    killed_after_checkpoint(config, tiny, tmp_path / "run", monkeypatch, 1)
    as_written_before(tmp_path / "run", tiny)
    path = tmp_path / "run" / "environment.json"
    environment = json.loads(path.read_text())
    environment["dataset_card"]["counts"]["train"] += 1
    path.write_text(json.dumps(environment))
    rewrite(tiny_root / "tiny")
    with pytest.raises(RecxError, match="unfinished run trained on other data"):
        train_run(config, load_dataset(tiny_root, "tiny"), tmp_path / "run")
