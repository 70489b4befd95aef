"""The evaluator's queries computed once for every user when a model's are row by row (`row_queries`; issue 58 §1:
`model.query` ran once a batch, its gathers and cosine normalisation a batch's launches): each batch's queries, their
products with the item table, and the evaluation's values, lists and per-user values are bit for bit those of
`model.query` once a batch. The dimension is 10 (rows of 40 or 80 bytes), so most batches' slices do not start on
64 bytes and are copied (MKL's product rounds otherwise off that alignment)."""

from __future__ import annotations

import pytest
import torch

from recx.config.run_config import resolve
from recx.eval.evaluator import ALIGNMENT, batch_queries, evaluate
from recx.models.registry import MODELS
from recx.training.build import build_model

ROW_MODELS = [name for name in MODELS.names() if MODELS.get(name).row_queries]
CASES = [(name, {}) for name in ROW_MODELS] + [
    ("mf", {"scoring": "dot", "temperature": 1.0}),
    ("wrmf", {"dtype": "float64"}),
]


def model_of(tiny, name: str, model_args: dict):
    config = resolve({"dataset": "tiny", "model": name, "dim": 10, "device": "cpu", "model_args": model_args})
    torch.manual_seed(0)
    return build_model(config, tiny, torch.device("cpu"))


def test_the_row_query_models_are_those_whose_query_is_row_by_row():
    assert set(ROW_MODELS) == {"mf", "lightgcn", "popularity", "wrmf", "rg2", "rgx"}


@pytest.mark.parametrize(("name", "model_args"), CASES)
def test_each_batch_gets_the_queries_and_scores_of_its_own_query_bit_for_bit(tiny, name, model_args):
    model = model_of(tiny, name, model_args)
    users = torch.arange(3, tiny.n_users, 2)
    table = model.item_table()
    table = torch.cat([table, table[:1]])  # 101 rows: at an odd width MKL rounds otherwise off 64-byte alignment
    for batch_size in (1, 7, 37, 1000):
        got = list(batch_queries(model, users, batch_size))
        expected = [model.query(batch) for batch in users.split(batch_size)]
        assert len(got) == len(expected)
        for ours, theirs in zip(got, expected, strict=True):
            assert ours.data_ptr() % ALIGNMENT == 0
            assert torch.equal(ours, theirs) and torch.equal(ours @ table.T, theirs @ table.T), (name, batch_size)


@pytest.mark.parametrize(("name", "model_args"), CASES)
@pytest.mark.parametrize("batch_size", [7, 64])
def test_the_evaluation_is_the_same_bit_for_bit_as_with_a_query_a_batch(tiny, name, model_args, batch_size):
    model = model_of(tiny, name, model_args)
    ours = evaluate(model, tiny, "test", [5, 10], batch_size, keep_topk=True, keep_per_user=True)
    model.row_queries = False  # the instance queries once a batch
    theirs = evaluate(model, tiny, "test", [5, 10], batch_size, keep_topk=True, keep_per_user=True)
    assert ours.values == theirs.values
    assert torch.equal(ours.topk, theirs.topk) and torch.equal(ours.users, theirs.users)
    assert ours.per_user.keys() == theirs.per_user.keys()
    for key, values in ours.per_user.items():
        assert torch.equal(values.nan_to_num(7.0), theirs.per_user[key].nan_to_num(7.0)), key
