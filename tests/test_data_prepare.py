"""The preparation pipeline: rating rule, duplicates, k-core, presets, card accounting, byte-identical output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse

from recx.core.errors import RecxError
from recx.data.dataset_folder import read_split
from recx.data.kcore import kcore
from recx.data.prepare import PrepareOptions, prepare


def movielens(path: Path, n_users: int = 60, n_items: int = 40, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    user = np.repeat(np.arange(1, n_users + 1), rng.integers(1, 30, n_users))
    item = rng.integers(1, n_items + 1, user.size) * 10
    rating = rng.integers(1, 11, user.size) / 2
    lines = [f"{u}::{i}::{r:g}::{978300000 + k}" for k, (u, i, r) in enumerate(zip(user, item, rating, strict=True))]
    path.write_text("\r\n".join(lines) + "\r\n")
    return path


def card(folder: Path) -> dict:
    return json.loads((folder / "card.json").read_text())


def test_card_explains_every_row(tmp_path):
    source = movielens(tmp_path / "ratings.dat")
    with open(source, "a") as handle:
        handle.write("oops\n1::10::5::1\n")
    out = prepare(
        "ml",
        PrepareOptions(format="movielens", source=source, rating=">=3", kcore=3, skip_bad_lines=True),
        tmp_path / "data",
    )
    rows = card(out)["rows"]
    assert rows["malformed_lines"] == 1
    removed = (
        rows["removed_by_rating"]
        + rows["removed_duplicates"]
        + sum(r["interactions"] for r in rows["removed_by_kcore"])
    )
    assert rows["read"] == removed + rows["kept"] and rows["removed_duplicates"] > 0 and rows["removed_by_kcore"]
    assert card(out)["n_interactions"] == rows["kept"]
    train, test = read_split(out, "train"), read_split(out, "test")
    assert train.rating.min() >= 3 and test.rating.min() >= 3
    user = np.concatenate([train.user, test.user])
    item = np.concatenate([train.item, test.item])
    assert np.bincount(user).min() >= 3 and np.bincount(item).min() >= 3
    assert len(set(zip(user.tolist(), item.tolist(), strict=True))) == user.size


def test_strict_threshold_and_duplicates_keep_earliest(tmp_path):
    source = tmp_path / "ratings.dat"
    source.write_text("1::5::4::300\n1::5::4::100\n1::6::3::50\n2::5::5::7\n")
    out = prepare("ml", PrepareOptions(format="movielens", source=source, rating=">3", ratios="50/50"), tmp_path / "d")
    rows = card(out)["rows"]
    assert (rows["removed_by_rating"], rows["removed_duplicates"], rows["kept"]) == (1, 1, 2)
    both = pd.concat([read_split(out, s).table().to_pandas() for s in ("train", "test")])
    assert sorted(both.timestamp.tolist()) == [7, 100]


def test_same_input_gives_identical_files(tmp_path):
    source = movielens(tmp_path / "ratings.dat")
    options = PrepareOptions(format="movielens", source=source, kcore=2, ratios="80/10/10", seed=4)
    first = prepare("a", options, tmp_path / "d1")
    second = prepare("a", options, tmp_path / "d2")
    for name in ("train", "valid", "test", "users", "items"):
        assert (first / f"{name}.parquet").read_bytes() == (second / f"{name}.parquet").read_bytes()


def test_the_card_records_each_files_sha256_hashed_as_it_is_written(tmp_path, monkeypatch):
    """card.json's `files`: the sha256 of each Parquet file's bytes, taken as they are written (no file is read back)."""
    import hashlib

    from recx.data import dataset_folder

    def read_back(path):
        raise AssertionError(f"{path} read back")

    monkeypatch.setattr(dataset_folder, "sha256_of", read_back)
    out = prepare("a", PrepareOptions(format="movielens", source=movielens(tmp_path / "r.dat")), tmp_path / "d")
    files = card(out)["files"]
    assert sorted(files) == sorted(path.name for path in out.glob("*.parquet"))
    for name, digest in files.items():
        assert digest == hashlib.sha256((out / name).read_bytes()).hexdigest(), name


def test_preparing_another_format_does_not_import_scipy(tmp_path):
    """The mat reader imports scipy when it reads (the registry imports every format: scipy.io was 0.16-0.39 s of a
    movielens preparation)."""
    import subprocess
    import sys

    source = movielens(tmp_path / "ratings.dat")
    code = (
        "import sys; from pathlib import Path; from recx.data.prepare import PrepareOptions, prepare; "
        f"prepare('a', PrepareOptions(format='movielens', source=Path({str(source)!r})), Path({str(tmp_path)!r})); "
        "print(sorted(m for m in sys.modules if m.startswith('scipy')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_threshold_removing_everything_leaves_nothing(tmp_path):
    source = movielens(tmp_path / "ratings.dat")
    with pytest.raises(RecxError, match=r"ratings.dat: the rating rule >=9 removes all"):
        prepare("ml", PrepareOptions(format="movielens", source=source, rating=">=9"), tmp_path / "d")
    assert not any((tmp_path / "d").iterdir())  # a refused prepare leaves nothing, not even its lock file


def test_kcore_removing_everything(tmp_path):
    source = movielens(tmp_path / "ratings.dat")
    with pytest.raises(RecxError, match="500-core is empty"):
        prepare("ml", PrepareOptions(format="movielens", source=source, kcore=500), tmp_path / "d")


def test_kcore_matches_a_naive_loop():
    rng = np.random.default_rng(0)
    user, item = rng.integers(0, 50, 600), rng.zipf(1.5, 600) % 60
    kept, rounds = kcore(user, item, 50, 60, 4)
    alive = np.ones(user.size, bool)
    while True:
        bad = (np.bincount(user[alive], minlength=50)[user] < 4) | (np.bincount(item[alive], minlength=60)[item] < 4)
        if not (bad & alive).any():
            break
        alive &= ~bad
    assert np.array_equal(kept, np.flatnonzero(alive))
    assert sum(r["interactions"] for r in rounds) == user.size - kept.size


def test_presets_fill_defaults_and_options_override(tmp_path):
    source = movielens(tmp_path / "ratings.dat", n_users=80)
    out = prepare("rg", PrepareOptions(format="movielens", source=source, preset="rg"), tmp_path / "d")
    params = card(out)["parameters"]
    assert card(out)["preset"] == "rg"
    assert (params["rating"], params["kcore"], params["split"]["method"]) == (">=3", 5, "per-user-random")
    assert (out / "valid.parquet").exists()
    out = prepare(
        "rg2", PrepareOptions(format="movielens", source=source, preset="rg", kcore=2, ratios="80/20"), tmp_path / "d"
    )
    params = card(out)["parameters"]
    assert params["kcore"] == 2 and len(params["split"]["ratios"]) == 2 and params["rating"] == ">=3"
    with pytest.raises(RecxError, match="unknown; valid: fastvae"):
        prepare("x", PrepareOptions(format="movielens", source=source, preset="nope"), tmp_path / "d")


def test_prism_preset_global_split(tmp_path):
    source = movielens(tmp_path / "ratings.dat")
    out = prepare("p", PrepareOptions(format="movielens", source=source, preset="prism"), tmp_path / "d")
    counts = card(out)["counts"]
    total = sum(counts.values())
    assert counts["train"] == int(np.floor(total * 0.8 + 0.5))


def test_gowalla_repeated_checkins_become_one(tmp_path):
    rows = [
        "0\t2010-10-19T23:55:27Z\t30.2\t-97.7\t22847",
        "0\t2010-10-18T22:17:43Z\t30.2\t-97.7\t420315",
        "0\t2010-10-17T23:42:03Z\t30.2\t-97.7\t22847",
        "1\t2010-10-12T00:21:28Z\t40.6\t-73.7\t22847",
    ]
    source = tmp_path / "loc-gowalla_totalCheckins.txt"
    source.write_text("\n".join(rows) + "\n")
    out = prepare(
        "g", PrepareOptions(format="gowalla-checkins", source=source, split="leave-one-out-latest"), tmp_path / "d"
    )
    assert card(out)["rows"]["removed_duplicates"] == 1 and card(out)["n_interactions"] == 3
    test = read_split(out, "test")
    latest = int(pd.Timestamp("2010-10-18T22:17:43Z").timestamp())
    assert test.user.tolist() == [0] and test.timestamp.tolist() == [latest]
    assert pd.read_parquet(out / "items.parquet").id[test.item[0]] == "420315"


def test_unicode_ids_kept_in_id_maps(tmp_path):
    source = tmp_path / "r.csv"
    source.write_text("Zoë,B,5,1\nAnn,B,4,2\nAnn,C,4,3\n", encoding="utf-8")
    out = prepare("a", PrepareOptions(format="amazon-ratings", source=source, ratios="50/50"), tmp_path / "d")
    assert pd.read_parquet(out / "users.parquet").id.tolist() == ["Ann", "Zoë"]
    assert pd.read_parquet(out / "items.parquet").id.tolist() == ["B", "C"]


def test_lightgcn_folder_kept_as_given(tmp_path):
    folder = tmp_path / "lg"
    folder.mkdir()
    (folder / "train.txt").write_text("0 1 2\n1 2\n")
    (folder / "test.txt").write_text("0 3\n1 1\n")
    out = prepare("lg", PrepareOptions(format="lightgcn", source=folder), tmp_path / "d")
    assert card(out)["counts"] == {"train": 3, "test": 2} and card(out)["parameters"]["split"] == "as given"


def test_mat_triplets_synthetic(tmp_path):
    matrix = scipy.sparse.csr_matrix(np.eye(6) + np.eye(6, k=1) + np.eye(6, k=2))
    scipy.io.savemat(tmp_path / "m.mat", {"data": matrix})
    out = prepare("m", PrepareOptions(format="mat", source=tmp_path / "m.mat", ratios="50/50"), tmp_path / "d")
    assert card(out)["n_interactions"] == int(matrix.nnz)
    (tmp_path / "t.txt").write_text("1 2 5\n1 3 4\n2 2 1\n")
    out = prepare("t", PrepareOptions(format="triplets", source=tmp_path / "t.txt", rating=">=2"), tmp_path / "d")
    assert card(out)["n_interactions"] == 2 and card(out)["parameters"]["rating"] == ">=2"
    out = prepare("s", PrepareOptions(format="synthetic", synthetic={"n_users": 50, "n_items": 40}), tmp_path / "d")
    assert card(out)["n_users"] == 50


def test_unknown_dataset_and_missing_source(tmp_path):
    with pytest.raises(RecxError, match="not a known dataset"):
        prepare("mine", PrepareOptions(), tmp_path / "d")
    with pytest.raises(RecxError, match="needs --source"):
        prepare("mine", PrepareOptions(format="movielens"), tmp_path / "d")
    with pytest.raises(RecxError, match="no such file"):
        prepare("mine", PrepareOptions(format="movielens", source=tmp_path / "nope.dat"), tmp_path / "d")


@pytest.mark.parametrize("name, where", [("netflix", "kaggle.com"), ("yelp", "yelp.com/dataset")])
def test_licensed_datasets_say_what_to_download(tmp_path, name, where):
    with pytest.raises(RecxError, match=f"{where}.*--source"):
        prepare(name, PrepareOptions(), tmp_path / "d")


def test_output_does_not_depend_on_threads(tmp_path):
    import pyarrow as pa

    source = movielens(tmp_path / "ratings.dat", n_users=200)
    options = PrepareOptions(format="movielens", source=source, preset="rg", seed=2)
    threads = pa.cpu_count()
    try:
        pa.set_cpu_count(1)
        single = prepare("a", options, tmp_path / "d1")
    finally:
        pa.set_cpu_count(threads)
    multi = prepare("a", options, tmp_path / "d2")
    for name in ("train", "valid", "test", "users", "items"):
        assert (single / f"{name}.parquet").read_bytes() == (multi / f"{name}.parquet").read_bytes()


def split_folder(tmp_path: Path, train: str, test: str, valid: str | None = None) -> Path:
    folder = tmp_path / "source"
    folder.mkdir()
    (folder / "train.txt").write_text(train)
    (folder / "test.txt").write_text(test)
    if valid is not None:
        (folder / "valid.txt").write_text(valid)
    return folder


def test_a_lightgcn_file_with_a_user_on_two_lines_is_refused(tmp_path, recx_cli):
    """A folder of `user item 1` lines read as adjacency lists made every `1` an item (issue 37, item 4)."""
    source = split_folder(tmp_path, "0 1 1\n1 2 1\n\n0 3 1\n", "0 2 1\n1 1 1\n")
    result = recx_cli("prepare", "lg", "--format", "lightgcn", "--source", source, "--data-root", tmp_path / "d")
    assert result.code == 1 and not (tmp_path / "d" / "lg").exists()
    assert f"error: {source / 'train.txt'}, lines 1 and 4: user 0 is on two lines; a LightGCN file lists each user" in (
        result.err
    )
    assert "use --format triplets" in result.err


def test_triplets_read_a_folder_split_as_given_and_prepare_counts_repeated_pairs(tmp_path, recx_cli):
    """`--format triplets` on a folder said "no such file"; a pair repeated in a split, or in a later split, is kept
    once where it comes first, and the count is in the card and the prepared line (issue 37, item 4)."""
    source = split_folder(tmp_path, "0 1 1\n1 2 1\n0 3 1\n0 1 1\n", "0 2 1\n1 2 1\n", valid="1 3 1\n")
    result = recx_cli("prepare", "t", "--format", "triplets", "--source", source, "--data-root", tmp_path / "d")
    assert result.code == 0, result.err
    assert "train 3 / valid 1 / test 1 interactions; repeated (user, item) pairs dropped: 2" in result.out
    out = tmp_path / "d" / "t"
    assert card(out)["parameters"]["split"] == "as given" and card(out)["counts"] == {"train": 3, "valid": 1, "test": 1}
    assert card(out)["rows"] == {"read": 7, "removed_duplicates": 2, "kept": 5}
    test = read_split(out, "test")
    assert (test.user.tolist(), test.item.tolist(), test.rating.tolist()) == ([0], [1], [1.0])
    (source / "test.txt").write_text("0 2\n")
    with pytest.raises(RecxError, match=r"test\.txt: lines of 2 fields, but train\.txt's have 3"):
        prepare("u", PrepareOptions(format="triplets", source=source), tmp_path / "d")
    (source / "test.txt").unlink()
    with pytest.raises(RecxError, match=r"source: missing test\.txt; the triplets format reads one file, or a folder"):
        prepare("u", PrepareOptions(format="triplets", source=source), tmp_path / "d")


def test_a_source_with_no_repeated_pairs_reports_none(tmp_path, recx_cli):
    result = recx_cli("prepare", "s", "--format", "synthetic", "--data-root", tmp_path / "d")
    assert result.code == 0 and "repeated (user, item) pairs dropped: 0" in result.out
