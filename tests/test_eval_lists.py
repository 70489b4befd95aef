"""Lists from any system (issue 36, section 6): `recx eval --lists` evaluates top-K lists in the dataset's original
ids with recx's metrics, strata and per-user files, and refuses or notes what it would misread."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.safety_helpers import assert_user_error

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--negatives", "20", "--quiet", "--device", "cpu"]


@pytest.fixture
def run(tiny_root, tmp_path, recx_cli):
    folder = tmp_path / "run"
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", folder, *FAST)
    assert result.code == 0, result.err
    return folder


def ids(tiny_root, which: str) -> pd.Series:
    return pd.read_parquet(tiny_root / "tiny" / f"{which}.parquet")["id"]


def test_a_runs_own_dump_gives_that_runs_metrics_exactly(run, tiny_root, tmp_path, recx_cli):
    top = tmp_path / "top.parquet"
    assert recx_cli("eval", run, "--k", "10,20,50", "--dump-topk", top).code == 0
    lists = tmp_path / "lists"
    result = recx_cli("eval", "--lists", top, "--dataset", "tiny", "--data-root", tiny_root, "--out", lists)
    assert result.code == 0, result.err
    mine = pd.read_parquet(lists / "results.parquet").set_index(["metric", "k", "stratum"]).value
    theirs = pd.read_parquet(run / "results.parquet").query("split == 'test'").set_index(["metric", "k", "stratum"])
    assert len(mine) == len(theirs) > 0 and (mine == theirs.value.loc[mine.index]).all()  # bit for bit
    per_user = pd.read_parquet(lists / "per_user_test.parquet")
    whole = {"coverage", "gini", "entropy", "exposure", "heldout_share"}  # catalogue-level: no per-user values
    assert whole < set(mine.index.get_level_values(0))
    assert set(per_user.metric) == set(mine.index.get_level_values(0)) - whole
    mine_lists = pd.read_parquet(lists / "topk_test.parquet").sort_values(["user", "rank"])
    run_lists = pd.read_parquet(run / "topk_test.parquet").sort_values(["user", "rank"])
    pd.testing.assert_frame_equal(mine_lists.reset_index(drop=True), run_lists.reset_index(drop=True))


def test_scored_lists_in_original_ids_match_an_independent_computation(tiny_root, tmp_path, recx_cli):
    """Another system's lists (every user gets the same five items by score), NDCG@5 and Recall@5 recomputed here."""
    test = pd.read_parquet(tiny_root / "tiny" / "test.parquet")
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    chosen = [3, 14, 15, 92, 65]
    rows = [(users[u], items[i], 10.0 - r) for u in sorted(test.user.unique()) for r, i in enumerate(chosen)]
    path = tmp_path / "system.tsv"
    pd.DataFrame(rows, columns=["user", "item", "score"]).sample(frac=1, random_state=0).to_csv(
        path, sep="\t", index=False
    )
    result = recx_cli(
        "eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--k", "5", "--out", tmp_path / "l"
    )
    assert result.code == 0, result.err
    got = (
        pd.read_parquet(tmp_path / "l" / "results.parquet")
        .query("stratum == 'all' and k == 5")
        .set_index("metric")
        .value
    )
    relevant = test.groupby("user").item.apply(set)
    ndcg = relevant.map(
        lambda s: (
            sum(1 / math.log2(r + 2) for r, i in enumerate(chosen) if i in s)
            / sum(1 / math.log2(r + 2) for r in range(min(5, len(s))))
        )
    )
    recall = relevant.map(lambda s: len(s & set(chosen)) / len(s))
    assert got["ndcg"] == pytest.approx(ndcg.mean(), abs=1e-12) and got["recall"] == pytest.approx(
        recall.mean(), abs=1e-12
    )
    assert "note:" in result.out and "items their user trained on" in result.out


def write(tmp_path, rows, columns=("user", "item", "rank"), name="l.tsv"):
    path = tmp_path / name
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, sep="\t", index=False)
    return path


def test_what_it_would_misread_is_refused_with_a_count(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    lists = lambda path: recx_cli("eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--k", "5")  # noqa: E731
    path = write(tmp_path, [(users[0], items[1], 1), ("ghost", items[2], 1), ("ghost2", items[2], 1)])
    assert_user_error(lists(path), f"{path}: 2 users (2 rows) are not users of dataset 'tiny' (e.g. 'ghost', 'ghost2')")
    path = write(tmp_path, [(users[0], "nothing", 1)])
    assert_user_error(lists(path), "1 items (1 rows) are not items of dataset 'tiny' (e.g. 'nothing')")
    path = write(tmp_path, [(users[0], items[1], 1), (users[0], items[1], 2)])
    assert_user_error(lists(path), "1 items are listed twice for one user")
    path = write(tmp_path, [(users[0], items[1], 0)])
    assert_user_error(lists(path), "1 ranks are not positive integers (e.g. 0)")
    path = write(tmp_path, [(users[0], items[1])], ("user", "item"))
    assert_user_error(lists(path), "expected columns user, item and rank or score")
    assert_user_error(recx_cli("eval", "--lists", path), "--lists evaluates a lists file on --dataset NAME")


def test_short_and_missing_lists_are_noted_and_count_as_misses(tiny_root, tmp_path, recx_cli):
    test = pd.read_parquet(tiny_root / "tiny" / "test.parquet")
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    first = int(test.user.min())
    path = write(tmp_path, [(users[first], items[i], r + 1) for r, i in enumerate([0, 1])])
    result = recx_cli(
        "eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--k", "5", "--out", tmp_path / "o"
    )
    assert result.code == 0, result.err
    evaluated = test.user.nunique()
    assert f"{evaluated - 1:,} evaluated users have no list (all misses)" in result.out
    assert "1 lists are shorter than K=5" in result.out


def test_report_puts_lists_beside_a_run_with_paired_tests(run, tiny_root, tmp_path, recx_cli):
    top = tmp_path / "top.parquet"
    assert recx_cli("eval", run, "--k", "10,20", "--dump-topk", top).code == 0
    lists = tmp_path / "lists"
    flags = ("--dataset", "tiny", "--data-root", tiny_root, "--k", "10,20", "--name", "from-lists")
    assert recx_cli("eval", "--lists", top, *flags, "--out", lists).code == 0
    report = tmp_path / "report"
    result = recx_cli("report", run / "results.parquet", lists / "results.parquet", "--out", report)
    assert result.code == 0, result.err
    rows = [line for line in (report / "significance.md").read_text().splitlines() if "| from-lists |" in line]
    assert len(rows) == 8 and all("| +0.0000 |" in row and row.endswith("| 1 | 1 | 1 | 1 |") for row in rows)
