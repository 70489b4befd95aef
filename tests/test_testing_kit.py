"""recx.testing catches what it claims to: each check fails on a method that breaks its part of the contract (the
broken methods are registered for one test; `isolated_plugins` removes them after)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from recx import Metric, Negatives, Sampler, TopK, register_metric, register_sampler
from recx.samplers.uniform import UniformSampler
from recx.testing import check_loss_value, check_metric, check_sampler_draws, check_sampler_law, check_sampler_log_q


@dataclass
class NoArgs:
    pass


def test_a_closed_form_that_is_not_the_law_of_the_draws_fails(isolated_plugins):
    @register_sampler("lying")
    class Lying(UniformSampler):
        """Draws uniformly but claims a popularity law."""

        def log_probability(self, batch, items):
            counts = self.dataset.item_popularity.double() + 1
            return torch.log(counts / counts.sum())[items].float()

    check_sampler_draws("lying")
    with pytest.raises(AssertionError, match="do not follow the law"):
        check_sampler_law("lying")


def test_a_positive_with_another_normaliser_fails(isolated_plugins):
    @register_sampler("shifted")
    class Shifted(UniformSampler):
        def sample(self, batch):
            drawn = super().sample(batch)
            return Negatives(drawn.items, drawn.log_q, drawn.positive_log_q + 0.5)

    with pytest.raises(AssertionError, match="log_q - positive_log_q differs from the formula"):
        check_sampler_log_q("shifted")


def test_draws_that_ignore_the_seed_fail(isolated_plugins):
    @register_sampler("unseeded")
    class Unseeded(Sampler):
        Args = NoArgs

        def sample(self, batch):
            items = torch.randint(0, self.dataset.n_items, (batch.users.numel(), self.n_negatives))
            zeros = torch.zeros(items.shape)
            return Negatives(items, zeros, torch.zeros(batch.users.numel()))

    with pytest.raises(AssertionError, match="two draws under the same seed differ"):
        check_sampler_draws("unseeded")


def test_a_metric_that_reads_past_its_cutoff_or_prefers_misses_fails(isolated_plugins):
    @register_metric("peeking")
    class Peeking(Metric):
        def per_user(self, top: TopK, k: int):
            return top.hits.sum(1).to(torch.float64)

    @register_metric("inverted")
    class Inverted(Metric):
        def per_user(self, top: TopK, k: int):
            return -top.n_hits(k)

    @register_metric("not_additive")
    class NotAdditive(Metric):
        additive = True

        def per_user(self, top: TopK, k: int):
            return (top.n_hits(k) > 0).to(torch.float64)

    with pytest.raises(AssertionError, match="reads places past the cut-off"):
        check_metric("peeking")
    with pytest.raises(AssertionError, match="must score higher than a list without"):
        check_metric("inverted")
    with pytest.raises(AssertionError, match="strata do not sum to the overall value"):
        check_metric("not_additive")


def test_a_loss_without_gradients_fails(isolated_plugins):
    from recx import Loss, register_loss

    @register_loss("detached")
    class Detached(Loss):
        Args = NoArgs

        def __call__(self, batch):
            return batch.pos_scores.detach().mean() * 0 + torch.tensor(1.0, requires_grad=True)

    with pytest.raises(AssertionError, match="gradients are missing, non-finite or all zero"):
        check_loss_value("detached")


# --- issue 45, section 3: the law of any sampler's draws, adaptive samplers, losses' plan-time checks, messages ---


def test_draws_of_another_law_than_their_own_log_q_fail_naming_the_query_and_the_items(isolated_plugins):
    @register_sampler("claims_uniform")
    class ClaimsUniform(Sampler):
        """Draws by popularity but says uniform (log q 0), without a closed form to compare with."""

        Args = NoArgs

        def sample(self, batch):
            law = self.dataset.item_popularity.double() + 1
            rows = law.expand(batch.users.numel(), -1)
            items = torch.multinomial(rows, self.n_negatives, replacement=True, generator=self.generator)
            return Negatives(items, torch.zeros(items.shape), torch.zeros(batch.users.numel()))

    with pytest.raises(AssertionError) as failure:
        check_sampler_law("claims_uniform")
    message = str(failure.value)
    assert "sampler 'claims_uniform' (sampler_args {}, n_negatives 200), query user" in message
    assert "the draws do not follow exp(log q) (the draws do not follow the law: chi-square p = " in message
    assert "worst: item " in message and "exp(log q) expects" in message


def test_a_log_q_that_moves_with_the_rest_of_the_batch_fails(isolated_plugins):
    @register_sampler("batch_dependent")
    class BatchDependent(UniformSampler):
        def sample(self, batch):
            drawn = super().sample(batch)
            shift = batch.positives.double().mean().float()  # the other rows' positives leak into row 0's log q
            return Negatives(drawn.items, drawn.log_q + shift, drawn.positive_log_q)

    with pytest.raises(AssertionError, match="log q - positive log q changes between draws"):
        check_sampler_law("batch_dependent")


OWN_SOFTMAX_RUN = {"model_args": {"scoring": "dot"}}  # the loss's scores are the proposal's logits


def own_softmax():
    @register_sampler("own_softmax")
    class OwnSoftmax(Sampler):
        """Draws from the model's own softmax with its exact log q: logQ-corrected sampled softmax then records
        about log(1 + n) whatever the model, while the model learns the full softmax."""

        Args = NoArgs
        adaptive = True

        def sample(self, batch):
            log_q = torch.log_softmax(batch.query @ batch.item_table.T, dim=1)
            items = torch.multinomial(log_q.exp(), self.n_negatives, replacement=True, generator=self.generator)
            return Negatives(items, log_q.gather(1, items), log_q.gather(1, batch.positives[:, None])[:, 0])


def test_a_correct_adaptive_sampler_is_checked_on_a_fixed_quantity(isolated_plugins, tmp_path, capsys):
    from recx.testing import check_sampler

    own_softmax()
    check_sampler("own_softmax", loss="softmax", n_negatives=8, workdir=tmp_path, run=OWN_SOFTMAX_RUN)
    printed = capsys.readouterr().out
    assert "adaptive proposal: its training loss is not comparable across epochs" in printed
    assert "checked instead: the full-softmax loss on held-out pairs" in printed
    with pytest.raises(AssertionError, match="did not lower the training loss: .* declares adaptive = True"):
        check_sampler(
            "own_softmax", loss="softmax", n_negatives=8, workdir=tmp_path, run=OWN_SOFTMAX_RUN, adaptive=False
        )


def test_a_losss_plan_time_check_refuses_a_mismatched_model_before_training(isolated_plugins):
    from recx import Loss, RecxError, register_loss
    from recx.api import run_config
    from recx.testing import check_loss

    @register_loss("cosine_only")
    class CosineOnly(Loss):
        """A softmax of cosine scores: defined for models scored by cosine similarity only."""

        Args = NoArgs

        @classmethod
        def check_model(cls, model, model_args, args):
            if model_args.get("scoring") != "cosine":
                raise RecxError(
                    f"model_args.scoring = {model_args.get('scoring')!r}: loss 'cosine_only' is defined on cosine "
                    "scores; set model_args.scoring: cosine"
                )

        def __call__(self, batch):
            scores = torch.cat([batch.pos_scores[:, None], batch.neg_scores], dim=1)
            return -torch.log_softmax(scores, dim=1)[:, 0].mean()

    with pytest.raises(RecxError, match="arguments: model_args.scoring = .dot.: loss .cosine_only. is defined on cos"):
        run_config({"loss": "cosine_only", "model_args": {"scoring": "dot"}})
    cosine = {"model_args": {"scoring": "cosine", "temperature": 0.1}}
    assert run_config({"loss": "cosine_only", **cosine}).loss == "cosine_only"
    check_loss("cosine_only", run=cosine)
    with pytest.raises(RecxError, match="loss 'cosine_only' is defined on cosine"):
        check_loss("cosine_only")  # the kit runs the plan-time check too: refused before any step


def test_every_failure_names_the_arguments_it_ran_with(isolated_plugins):
    @register_sampler("shifted_again")
    class Shifted(UniformSampler):
        def sample(self, batch):
            drawn = super().sample(batch)
            return Negatives(drawn.items, drawn.log_q, drawn.positive_log_q + 0.5)

    with pytest.raises(
        AssertionError, match=r"sampler 'shifted_again' \(sampler_args \{'exclude_train': False\}, n_negatives 5\)"
    ):
        check_sampler_log_q("shifted_again", {"exclude_train": False}, n_negatives=5)
    from recx import Loss, register_loss

    @register_loss("detached_again")
    class Detached(Loss):
        Args = NoArgs

        def __call__(self, batch):
            return batch.pos_scores.detach().mean() * 0 + torch.tensor(1.0, requires_grad=True)

    with pytest.raises(
        AssertionError, match=r"loss 'detached_again' \(loss_args \{\}, sampler popularity, n_negatives 3\)"
    ):
        check_loss_value("detached_again", sampler="popularity", n_negatives=3)
