"""card.json is checked against the data it describes before any use (issue 37, item 3): n_users and n_items equal
the rows of the id maps and bound every id, counts name each split file with its rows. Before, n_items edited up
trained over phantom items with exit 0, edited down failed inside the model, and `recx eval` blamed model.pt."""

import json

import pytest

from recx.core.errors import RecxError
from recx.data.dataset import load_dataset


def edit_card(root, change) -> None:
    path = root / "tiny" / "card.json"
    card = json.loads(path.read_text())
    change(card)
    path.write_text(json.dumps(card))


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda c: c.update(n_items=c["n_items"] + 10), r"n_items = 110, but items\.parquet holds 100 items"),
        (lambda c: c.update(n_items=c["n_items"] - 10), r"n_items = 90, but items\.parquet holds 100 items"),
        (lambda c: c.update(n_users=201), r"n_users = 201, but users\.parquet holds 200 users"),
        (lambda c: c.update(n_users="200"), r"n_users = '200', but expected a non-negative integer"),
        (lambda c: c.pop("n_items"), r"n_items = None, but expected a non-negative integer"),
        (
            lambda c: c["counts"].update(train=c["counts"]["train"] + 1),
            r"counts\.train = \d+, but train\.parquet holds",
        ),
        (lambda c: c["counts"].pop("valid"), r"counts = .*, but the folder holds train\.parquet, valid\.parquet, test"),
    ],
)
def test_a_card_that_does_not_describe_its_data_is_refused(tiny_root, change, expected):
    edit_card(tiny_root, change)
    with pytest.raises(RecxError, match=rf"^{tiny_root / 'tiny' / 'card.json'}: {expected}.*prepare the dataset again"):
        load_dataset(tiny_root, "tiny")


def test_ids_beyond_the_card_are_refused_without_id_maps(tiny_root):
    """A dataset without items.parquet is bounded by its ids alone."""
    (tiny_root / "tiny" / "items.parquet").unlink()
    edit_card(tiny_root, lambda c: c.update(n_items=50))
    with pytest.raises(RecxError, match=r"card\.json: n_items = 50, but train\.parquet holds item ids 0\.\.9\d"):
        load_dataset(tiny_root, "tiny")


def test_eval_names_the_card_not_the_weights(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "run"
    fast = (
        "--dim",
        "8",
        "--epochs",
        "1",
        "--device",
        "cpu",
        "--quiet",
        "--ks",
        "5,10",
        "--set",
        "valid_metric=ndcg@10",
    )
    assert recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *fast).code == 0
    edit_card(tiny_root, lambda c: c.update(n_items=c["n_items"] + 10))
    result = recx_cli("eval", run, "--data-root", tiny_root, "--ks", "5", "--quiet")
    assert result.code == 1 and "card.json: n_items = 110, but items.parquet holds 100 items" in result.err
    assert "model.pt" not in result.err
    train = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "r2", *fast)
    assert train.code == 1 and "card.json: n_items = 110" in train.err and not (tmp_path / "r2").exists()
