"""The contract every sampler, loss, model and metric keeps, as functions any package's tests can call: recx's own
contract test (tests/test_contract.py) calls them for every built-in name, and a plugin's tests call them for its
own. Each check raises AssertionError saying what failed.

    from recx.testing import check_loss, check_metric, check_sampler

    def test_my_sampler(tmp_path):
        check_sampler("mixture", {"weight": 0.3}, workdir=tmp_path)

What is checked:
- samplers (`check_sampler`): shapes, dtype and device of the draws, ids in the catalogue, detached weights whose
  rows sum to one, the same draws under the same seed, `exclude_train` honoured where offered; the log q convention
  (one normaliser for a query's positive and its candidates) against a given formula, or against the sampler's own
  closed form (`log_probability`), whose law must sum to one over the catalogue and match its draws (chi-square);
  two epochs of training complete with finite results and a lower training loss.
- losses (`check_loss`): a finite scalar with finite, non-zero gradients, the same value twice; two epochs.
- models (`check_model`): the public representations (query [B, d], items [n_items, d]), detached evaluation tables,
  the same tables under the same seed; two epochs (or a complete run without training).
- metrics (`check_metric`): float64 values per user, finite, the same for a user in any batch, higher for a perfect
  list than for a list without hits, blind past the cut-off, and, when additive, strata summing to the overall value.
"""

from recx.testing.data import make_sampler, random_batch, random_dataset
from recx.testing.losses import check_loss, check_loss_value
from recx.testing.metrics import check_metric
from recx.testing.models import check_model, check_model_api
from recx.testing.runs import check_trains, train_briefly
from recx.testing.samplers import check_sampler, check_sampler_draws, check_sampler_law, check_sampler_log_q
from recx.testing.stats import assert_counts_follow, assert_follows

__all__ = [
    "assert_counts_follow",
    "assert_follows",
    "check_loss",
    "check_loss_value",
    "check_metric",
    "check_model",
    "check_model_api",
    "check_sampler",
    "check_sampler_draws",
    "check_sampler_law",
    "check_sampler_log_q",
    "check_trains",
    "make_sampler",
    "random_batch",
    "random_dataset",
    "train_briefly",
]
