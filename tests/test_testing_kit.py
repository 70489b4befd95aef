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
