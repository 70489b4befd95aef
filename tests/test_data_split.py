"""Splits: per-user random and temporal ratio, global random, leave-one-out; deterministic from the seed."""

from __future__ import annotations

import numpy as np
import pytest

from recx.core.errors import RecxError
from recx.data.split import global_random_split, leave_one_out_split, parse_ratios, per_user_ratio_split, split_rows


@pytest.fixture
def users():
    rng = np.random.default_rng(1)
    return np.repeat(np.arange(300), rng.integers(1, 40, 300)).astype(np.int32)


def _check_partition(parts: dict, n: int) -> None:
    joined = np.sort(np.concatenate(list(parts.values())))
    assert np.array_equal(joined, np.arange(n))
    for index in parts.values():
        assert np.all(np.diff(index) > 0)


@pytest.mark.parametrize("text", ["80/20", "80/10/10"])
def test_per_user_ratio(users, text):
    ratios = parse_ratios(text)
    parts = per_user_ratio_split(users, ratios, seed=3)
    _check_partition(parts, users.size)
    n = np.bincount(users)
    train = np.bincount(users[parts["train"]], minlength=n.size)
    assert (train >= 1).all()
    assert np.array_equal(train, np.maximum(np.floor(n * ratios[0] + 0.5), 1))
    if "valid" in parts:
        valid = np.bincount(users[parts["valid"]], minlength=n.size)
        assert np.array_equal(valid, np.minimum(np.floor(n * ratios[1] + 0.5), n - train))


def test_per_user_deterministic_and_seeded(users):
    ratios = parse_ratios("80/20")
    a, b = per_user_ratio_split(users, ratios, 0), per_user_ratio_split(users, ratios, 0)
    c = per_user_ratio_split(users, ratios, 1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["test"], c["test"])


def test_per_user_temporal(users):
    time = np.random.default_rng(2).integers(0, 1000, users.size)
    parts = split_rows("per-user-temporal", users, time, parse_ratios("80/20"), 0, "src")
    last_train = np.full(users.max() + 1, -1)
    np.maximum.at(last_train, users[parts["train"]], time[parts["train"]])
    assert (time[parts["test"]] >= last_train[users[parts["test"]]]).all()


def test_global_random(users):
    parts = global_random_split(users.size, parse_ratios("80/10/10"), 5)
    _check_partition(parts, users.size)
    assert parts["train"].size == int(np.floor(users.size * 0.8 + 0.5))
    assert parts["valid"].size == int(np.floor(users.size * 0.9 + 0.5)) - parts["train"].size


@pytest.mark.parametrize("n_parts", [2, 3])
def test_leave_one_out_latest(users, n_parts):
    time = np.random.default_rng(4).permutation(users.size)
    parts = leave_one_out_split(users, n_parts, 0, time)
    _check_partition(parts, users.size)
    n = np.bincount(users)
    test = np.bincount(users[parts["test"]], minlength=n.size)
    assert np.array_equal(test, (n >= 2).astype(int))
    latest = np.full(n.size, -1)
    np.maximum.at(latest, users, time)
    assert np.array_equal(time[parts["test"]], latest[users[parts["test"]]])
    if n_parts == 3:
        assert np.array_equal(np.bincount(users[parts["valid"]], minlength=n.size), (n >= 3).astype(int))
    assert (np.bincount(users[parts["train"]], minlength=n.size) >= 1).all()


def test_leave_one_out_random_deterministic(users):
    a = split_rows("leave-one-out-random", users, None, parse_ratios("80/20"), 7, "src")
    b = split_rows("leave-one-out-random", users, None, parse_ratios("80/20"), 7, "src")
    assert np.array_equal(a["test"], b["test"])


def test_temporal_needs_timestamps(users):
    with pytest.raises(RecxError, match="needs timestamps"):
        split_rows("leave-one-out-latest", users, None, parse_ratios("80/20"), 0, "src.txt")
    with pytest.raises(RecxError, match="expected one of"):
        split_rows("by-magic", users, None, parse_ratios("80/20"), 0, "src.txt")


def test_bad_ratios():
    with pytest.raises(RecxError):
        parse_ratios("80/x")
    with pytest.raises(RecxError):
        parse_ratios("100")
