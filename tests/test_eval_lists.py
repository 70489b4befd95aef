"""Lists from any system (issue 36, section 6): `recx eval --lists` evaluates top-K lists in the dataset's original
ids with recx's metrics, strata and per-user files, and refuses or notes what it would misread."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

import recx
from recx import RecxError
from tests.safety_helpers import assert_user_error, snapshot

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "20", "--quiet", "--device", "cpu"]


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
    assert recx_cli("eval", run, "--ks", "10,20,50", "--dump-topk", top).code == 0
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
        "eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5", "--out", tmp_path / "l"
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
    assert "note:" in result.out and "training items" in result.out and "of their user" in result.out


def write(tmp_path, rows, columns=("user", "item", "rank"), name="l.tsv"):
    path = tmp_path / name
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, sep="\t", index=False)
    return path


def test_what_it_would_misread_is_refused_with_a_count(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    lists = lambda path: recx_cli("eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5")  # noqa: E731
    path = write(tmp_path, [(users[0], items[1], 1), ("ghost", items[2], 1), ("ghost2", items[2], 1)])
    assert_user_error(lists(path), f"{path}: 2 users (2 rows) are not users of dataset 'tiny' (e.g. 'ghost', 'ghost2')")
    path = write(tmp_path, [(users[0], "nothing", 1)])
    assert_user_error(lists(path), "1 item (1 row) is not an item of dataset 'tiny' (e.g. 'nothing')")
    path = write(tmp_path, [(users[0], items[1], 1), (users[0], items[1], 2)])
    assert_user_error(lists(path), "1 item is listed twice for one user")
    path = write(tmp_path, [(users[0], items[1], 0)])
    assert_user_error(lists(path), "1 rank is not a positive integer (e.g. 0)")
    path = write(tmp_path, [(users[0], items[1])], ("user", "item"))
    assert_user_error(lists(path), "expected columns user, item and rank or score")
    assert_user_error(recx_cli("eval", "--lists", path), "--lists evaluates a lists file on --dataset NAME")


def test_short_and_missing_lists_are_noted_and_count_as_misses(tiny_root, tmp_path, recx_cli):
    test = pd.read_parquet(tiny_root / "tiny" / "test.parquet")
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    first = int(test.user.min())
    path = write(tmp_path, [(users[first], items[i], r + 1) for r, i in enumerate([0, 1])])
    result = recx_cli(
        "eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5", "--out", tmp_path / "o"
    )
    assert result.code == 0, result.err
    evaluated = test.user.nunique()
    out = result.out.replace("\n", "")
    assert (
        f"{evaluated - 1:,} evaluated users have no list: all misses for the accuracy metrics; APLT, ARP, EPC are "
        "averaged over the 1 user with a list, and the catalogue-level metrics (Coverage, Entropy, Exposure, Gini) "
        "count its 1 list" in out
    ), out
    assert (
        "1 list is shorter than K=5: the missing places are misses for the accuracy metrics; APLT, ARP, EPC of a "
        "list are over the items it holds" in out
    )
    record = json.loads((tmp_path / "o" / "lists.json").read_text())
    assert (record["listed_users"], record["users"]) == (1, evaluated)


def test_report_puts_lists_beside_a_run_with_paired_tests(run, tiny_root, tmp_path, recx_cli):
    top = tmp_path / "top.parquet"
    assert recx_cli("eval", run, "--ks", "10,20", "--dump-topk", top).code == 0
    lists = tmp_path / "lists"
    flags = ("--dataset", "tiny", "--data-root", tiny_root, "--ks", "10,20", "--name", "from-lists")
    assert recx_cli("eval", "--lists", top, *flags, "--out", lists).code == 0
    report = tmp_path / "report"
    result = recx_cli("report", run / "results.parquet", lists / "results.parquet", "--out", report)
    assert result.code == 0, result.err
    rows = [line for line in (report / "significance.md").read_text().splitlines() if "| from-lists |" in line]
    assert len(rows) == 8 and all("| +0.0000 |" in row and row.endswith("| 1 | 1 | 1 | 1 |") for row in rows)


# Issue 46, item 3: a folder of evaluated lists is not replaced silently; equal ranks are refused and equal scores
# ordered by a stated rule; the excluded items are named right; the file is checked before the dataset is loaded.


def first_test_users(tiny_root, count: int) -> list[int]:
    return sorted(pd.read_parquet(tiny_root / "tiny" / "test.parquet").user.unique())[:count]


def test_out_holding_evaluated_lists_is_refused_unless_force_which_swaps_in_whole(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    rows = [(users[u], items[i], r + 1) for u in first_test_users(tiny_root, 20) for r, i in enumerate([3, 14, 15])]
    first, second = write(tmp_path, rows, name="first.tsv"), write(tmp_path, rows[::-1][:30], name="second.tsv")
    out = tmp_path / "lists"
    flags = ("--dataset", "tiny", "--data-root", tiny_root, "--ks", "5", "--out", out)
    assert recx_cli("eval", "--lists", first, *flags).code == 0
    before = snapshot(out, strict=True)
    assert_user_error(
        recx_cli("eval", "--lists", second, *flags),
        f"{out} already holds an evaluation of lists ('first': {first}, split test); pass --force to replace it",
    )
    assert snapshot(out, strict=True) == before  # not a byte changed
    assert_user_error(
        recx_cli("eval", "--lists", second, *flags[:-1], first),
        f"{first} is a file, not a folder; choose another --out",
    )
    with pytest.raises(RecxError, match="already holds an evaluation of lists"):
        recx.evaluate_lists(second, "tiny", ks=[5], data_root=tiny_root, run_dir=out)

    from recx.runs import lists as lists_module

    def broken(*args, **kwargs):
        raise RecxError("the disk is full")

    with pytest.MonkeyPatch.context() as patch:  # a replacement that fails leaves the old evaluation whole
        patch.setattr(lists_module, "write_per_user", broken)
        assert_user_error(recx_cli("eval", "--lists", second, *flags, "--force"), "the disk is full")
    assert snapshot(out, strict=True) == before and not list(tmp_path.glob(".lists.tmp-*"))
    replaced = recx_cli("eval", "--lists", second, *flags, "--force")
    assert replaced.code == 0, replaced.err
    assert json.loads((out / "lists.json").read_text())["name"] == "second" and (out / "COMPLETE").is_file()
    assert_user_error(
        recx_cli("eval", out, "--ks", "5"), f"{out} holds evaluated lists (recx eval --lists), not a trained"
    )
    assert not list(tmp_path.glob(".lists.*-*"))  # the old one was swapped out and removed


def test_equal_ranks_are_refused_and_equal_scores_ordered_by_a_stated_rule(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    user = users[first_test_users(tiny_root, 1)[0]]
    path = write(tmp_path, [(user, items[1], 1), (user, items[2], 2), (user, items[3], 2)])
    assert_user_error(
        recx_cli("eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5"),
        f"1 rank of a user's list is given to two items or more (e.g. user {user!r} rank 2: {items[2]!r}, "
        f"{items[3]!r}); ranks must differ within a user's list",
    )
    rows = [(users[u], items[i], 1.0) for u in first_test_users(tiny_root, 50) for i in range(0, 40, 3)]
    frames = [
        pd.DataFrame(rows, columns=["user", "item", "score"]).sample(frac=1, random_state=seed) for seed in (0, 1)
    ]
    results = []
    for seed, frame in enumerate(frames):  # the same lists in two row orders
        path = tmp_path / f"ties-{seed}.tsv"
        frame.to_csv(path, sep="\t", index=False)
        result = recx_cli(
            "eval",
            "--lists",
            path,
            "--dataset",
            "tiny",
            "--data-root",
            tiny_root,
            "--ks",
            "5",
            "--out",
            tmp_path / str(seed),
        )
        assert result.code == 0, result.err
        assert (
            "50 lists hold equal scores (700 items share a score with another item of the same list): equal scores"
            in (" ".join(result.out.split()))
        )
        assert "ordered by the item's position in the dataset's items.parquet, not by the file's row order" in (
            " ".join(result.out.split())
        )
        results.append(pd.read_parquet(tmp_path / str(seed) / "results.parquet").value)
    pd.testing.assert_series_equal(results[0], results[1])
    ranked = pd.DataFrame(
        [
            (users[u], items[i], 5.0 - r // 2)
            for u in first_test_users(tiny_root, 1)
            for r, i in enumerate([9, 4, 7, 2])
        ],
        columns=["user", "item", "score"],
    )
    path = tmp_path / "pairs.tsv"
    ranked.to_csv(path, sep="\t", index=False)
    from recx.data.dataset import load_dataset
    from recx.runs.lists import ranked_items

    data = load_dataset(tiny_root, "tiny")
    user_code = torch.tensor([first_test_users(tiny_root, 1)[0]])
    order, _ = ranked_items(path, data, user_code, 4)
    assert order.tolist() == [[4, 9, 2, 7]]  # each pair of equal scores by item position, the file said 9, 4 and 7, 2


def test_the_items_recx_excludes_are_named_training_or_validation_items(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    train, valid = (pd.read_parquet(tiny_root / "tiny" / f"{s}.parquet") for s in ("train", "valid"))
    test_users = set(first_test_users(tiny_root, 1000))
    user = next(u for u in sorted(valid.user.unique()) if u in test_users)
    listed = [*valid[valid.user == user].item[:1], *train[train.user == user].item[:2]]
    path = write(tmp_path, [(users[user], items[i], r + 1) for r, i in enumerate(listed)])
    flags = ("--dataset", "tiny", "--data-root", tiny_root, "--ks", "5")
    result = recx_cli("eval", "--lists", path, *flags, "--out", tmp_path / "t")
    assert result.code == 0, result.err
    assert (
        "3 listed items: 2 are training items and 1 is a validation item of their user (recx's own test ranking "
        "leaves them out; here they count as misses)"
    ) in " ".join(result.out.split())
    assert "trained on" not in result.out
    result = recx_cli("eval", "--lists", path, *flags, "--split", "valid", "--out", tmp_path / "v")
    assert result.code == 0, result.err
    assert "2 listed items: 2 are training items of their user (recx's own validation ranking" in " ".join(
        result.out.split()
    )


def test_a_malformed_lists_file_is_refused_before_the_dataset_is_loaded(tiny_root, tmp_path, recx_cli, monkeypatch):
    from recx import api

    def never(*args, **kwargs):
        raise AssertionError("the dataset was loaded")

    monkeypatch.setattr(api, "load_dataset", never)
    lists = lambda path: recx_cli("eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root)  # noqa: E731
    path = write(tmp_path, [("u", "i")], ("user", "item"))
    assert_user_error(lists(path), f"{path}: expected columns user, item and rank or score (found user, item)")
    path = write(tmp_path, [("u", "i", "first")])
    assert_user_error(lists(path), "1 rank is not a positive integer (e.g. 'first')")
    path = write(tmp_path, [("u", "i", 1), ("u", "j", 1)])
    assert_user_error(lists(path), "1 rank of a user's list is given to two items or more (e.g. user 'u' rank 1")
    path = tmp_path / "nested.parquet"
    pd.DataFrame({"user": [["a"]], "item": ["i"], "rank": [1]}).to_parquet(path)
    assert_user_error(lists(path), f"{path}: column user holds list<element: string>; expected integers or text")
    path = write(tmp_path, [("u", None, 1)])
    assert_user_error(lists(path), "1 row without a user or an item")


def test_one_of_a_count_is_singular(tiny_root, tmp_path, recx_cli):
    users, items = ids(tiny_root, "users"), ids(tiny_root, "items")
    path = write(tmp_path, [(users[0], items[1], 1), ("ghost", items[2], 1)])
    assert_user_error(
        recx_cli("eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5"),
        f"{path}: 1 user (1 row) is not a user of dataset 'tiny' (e.g. 'ghost')",
    )
    user = users[first_test_users(tiny_root, 1)[0]]
    path = write(tmp_path, [(user, items[1], 1.5)], ("user", "item", "score"))
    result = recx_cli(
        "eval", "--lists", path, "--dataset", "tiny", "--data-root", tiny_root, "--ks", "5", "--out", tmp_path / "o"
    )
    assert result.code == 0 and "1 list is shorter than K=5" in result.out, result.err
    report = recx_cli("report", tmp_path / "o" / "results.parquet", "--out", tmp_path / "report", "--ks", "5")
    assert report.code == 0, report.err
    assert "mean ± std over 1 run (seed) per method" in (tmp_path / "report" / "report.md").read_text()


def test_lists_for_half_the_users_keep_arp_and_say_over_how_many_users(run, tiny_root, tmp_path, recx_cli):
    """A run's own lists, then the same lists for every other user only: NDCG falls (a user without a list is all
    misses) but ARP, APLT and EPC are the run's per-user values averaged over the users with a list; the note, the
    report's popularity section and its tests say over how many users."""
    top = tmp_path / "top.parquet"
    assert recx_cli("eval", run, "--ks", "10", "--dump-topk", top).code == 0
    frame = pd.read_parquet(top)
    kept = sorted(frame.user.unique())[::2]
    half = tmp_path / "half.parquet"
    frame[frame.user.isin(kept)].to_parquet(half)
    flags = ("--dataset", "tiny", "--data-root", tiny_root, "--ks", "10", "--name", "half", "--out", tmp_path / "h")
    result = recx_cli("eval", "--lists", half, *flags)
    assert result.code == 0, result.err
    evaluated = frame.user.nunique()
    assert f"{evaluated - len(kept):,} evaluated users have no list" in result.out.replace("\n", "")
    full = pd.read_parquet(run / "per_user_test.parquet").query("k == 10 and stratum == 'all'")
    users = pd.read_parquet(tiny_root / "tiny" / "users.parquet")["id"].astype(str)
    listed = set(users[users.isin(kept)].index)
    values = pd.read_parquet(tmp_path / "h" / "results.parquet").query("k == 10 and stratum == 'all'")
    got = values.set_index("metric").value
    for metric in ("arp", "aplt", "epc"):
        rows = full[(full.metric == metric) & full.user.isin(listed)]
        assert got[metric] == pytest.approx(rows.value.mean(), abs=1e-12), metric
    ndcg = full[full.metric == "ndcg"]
    assert got["ndcg"] == pytest.approx(ndcg[ndcg.user.isin(listed)].value.sum() / len(ndcg), abs=1e-12)
    report = tmp_path / "report"
    result = recx_cli(
        "report", run / "results.parquet", tmp_path / "h" / "results.parquet", "--out", report, "--ks", "10"
    )
    assert result.code == 0, result.err
    text = (report / "report.md").read_text().replace("\n", " ")
    assert f"half: {len(kept):,} of its {evaluated:,} evaluated users have a list; APLT, ARP, EPC average over" in text
    lines = (report / "report.md").read_text().splitlines()
    rows = {line.split(" | ")[1]: line.split(" | ")[4] for line in lines if line.startswith("| tiny | ")}
    assert rows["ARP@10"] == str(len(kept)) and rows["NDCG@10"] == str(evaluated), rows
