"""DNS(M, N) (the hard-negative-sampling slides; DNS of Zhang et al. 2013 is DNS(1, N)).

Draw N candidates uniformly (from the user's non-interacted items I_u^- unless `exclude_train` is off) and keep the
M with the highest score r(u, j) = query · item_j. Per the slides' Theorem 1, BPR with these negatives optimises
OPAUC(β) with β = M / N of the negatives: P_ns(j | u) = 1/M on the top M, 0 elsewhere.

log_q: the kept items have no fixed proposal probability (the selection depends on the scores), so the sampler returns
the uniform proposal's constant -log n_items for the candidates and the positive alike: a logQ-corrected softmax is then
the uncorrected one (the constant cancels), and BPR/BCE ignore it. `config.n_negatives` is not used (M is `m`).
"""

from __future__ import annotations

from dataclasses import dataclass

from recx.core.args import arg
from recx.core.errors import RecxError
from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.candidates import candidate_scores, uniform_candidates, uniform_log_q
from recx.samplers.registry import SAMPLERS


@dataclass
class DNSArgs:
    """Checked in `__post_init__`, so that `resolve` (and a sweep's plan) refuses a bad pair before any run."""

    m: int = arg(1, at_least=1, at_most=10_000_000, help="M: the highest-scored candidates kept")
    n_candidates: int = arg(200, at_least=1, at_most=10_000_000, help="N: uniform candidates drawn")
    exclude_train: bool = arg(True, help="draw only items the user has not trained on")
    max_redraws: int = arg(20, at_least=0, at_most=1_000, help="rounds of redrawing training items before giving up")

    def __post_init__(self):
        if not 1 <= self.m <= self.n_candidates:
            raise RecxError(f"sampler_args.m = {self.m}: expected 1 <= m <= n_candidates ({self.n_candidates})")


@SAMPLERS.register("dns")
class DynamicNegativeSampler(Sampler):
    summary = "DNS(M, N): the M highest-scored of N uniform candidates (hard negatives)"
    figure = (3, {})
    adaptive = True
    unchecked_law = "the M highest-scored of N uniform candidates are kept: log q is the uniform proposal's constant"
    Args = DNSArgs
    reference_log_q_gap = constant_log_q_gap

    def __init__(self, dataset, n_negatives, args: DNSArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)

    def sample(self, batch: Batch) -> Negatives:
        candidates = uniform_candidates(
            self, batch.users, self.args.n_candidates, self.args.exclude_train, self.args.max_redraws
        )
        top = candidate_scores(batch, candidates).topk(self.args.m, dim=1).indices
        items = candidates.gather(1, top)
        n_items = self.dataset.n_items
        return Negatives(
            items,
            uniform_log_q(items.shape, n_items, items.device),
            uniform_log_q(batch.users.shape, n_items, items.device),
        )
