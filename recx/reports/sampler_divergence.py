"""How close a sampler's proposal is to the model's softmax (the FastVAE paper's §7.3.1 and Figure 2).

For a sample of users u with query z_u, the softmax is P(i | u) = exp(z_u·q_i) / Σ_j exp(z_u·q_j). For a proposal Q:
    KL(Q ‖ P) = Σ_i Q(i) log(Q(i) / P(i)),    TV(Q, P) = ½ Σ_i |Q(i) - P(i)|.
Q is the sampler's closed form (`Sampler.log_probability`) where it has one (uniform, popularity, midx*, kernel);
otherwise (DNS) the empirical law of `draws` draws per user, and KL is the plug-in estimate over the drawn items.
Figure 2: for one user, items sorted by descending training popularity, the cumulative probability of the softmax
and of each proposal estimated from `draws` draws (100,000 in the paper), for a randomly initialised model and the
trained one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from recx.core.errors import RecxError
from recx.models.base import Model
from recx.reports.plots import save
from recx.runs.evaluate import open_saved_run
from recx.runs.store import write_artifact
from recx.samplers.base import Batch
from recx.samplers.registry import SAMPLERS, new_sampler
from recx.training.build import build_model

DRAWS_PER_QUERY = 1000
MAX_REPLICAS = 8192  # queries per sampling call when a user's law is estimated from draws


@dataclass
class ModelView:
    """A model state to diagnose: its name ('random init' or 'trained') and its representations."""

    name: str
    query: torch.Tensor  # [U, d] for the sampled users
    items: torch.Tensor  # [M, d]


def figure_samplers() -> list[str]:
    """The samplers of FastVAE's Figure 2 in its order: those whose class sets `figure`."""
    placed = {name: SAMPLERS.get(name).figure for name in SAMPLERS.names()}
    return sorted((name for name, figure in placed.items() if figure is not None), key=lambda name: placed[name][0])


def make_sampler(name: str, dataset, n_codewords: int, seed: int, device: torch.device):
    """The sampler with the figure's arguments: its law over all items (`exclude_train` off where offered) and
    `n_codewords` codewords where it has codebooks."""
    sampler_class = SAMPLERS.get(name)
    offered = {spec.name for spec in fields(sampler_class.Args)}
    args: dict[str, Any] = dict(sampler_class.figure[1]) if sampler_class.figure else {}
    if "n_codewords" in offered:
        args["n_codewords"] = n_codewords
    if "exclude_train" in offered:
        args["exclude_train"] = False
    return new_sampler(name, dataset, DRAWS_PER_QUERY, args, torch.Generator(device=device).manual_seed(seed), "torch")


def user_batch(users: torch.Tensor, query: torch.Tensor, items: torch.Tensor) -> Batch:
    return Batch(users, torch.zeros_like(users), query, items)


def empirical_counts(sampler, user: torch.Tensor, query: torch.Tensor, items: torch.Tensor, draws: int) -> torch.Tensor:
    """Counts [M] of `draws` items drawn for one user (its query replicated over as many queries as needed)."""
    counts = torch.zeros(items.shape[0], dtype=torch.float64, device=items.device)
    drawn, replicas = 0, 8
    while drawn < draws:
        batch = user_batch(user.expand(replicas), query.expand(replicas, -1), items)
        negatives = sampler.sample(batch).items
        per_query = negatives.shape[1] if negatives.shape[0] == replicas else negatives.numel() / replicas
        negatives = negatives.flatten()[: draws - drawn]
        counts.index_add_(0, negatives, torch.ones_like(negatives, dtype=torch.float64))
        drawn += negatives.numel()
        replicas = max(1, min(MAX_REPLICAS, math.ceil((draws - drawn) / per_query)))
    return counts


def proposal_log_probabilities(sampler, users, query, items, draws: int) -> tuple[torch.Tensor, bool]:
    """([U, M] log Q, exact?): the closed form, else the empirical law of `draws` draws per user."""
    if sampler.has_closed_form():
        all_items = torch.arange(items.shape[0], device=items.device)[None, :].expand(users.numel(), -1)
        return sampler.log_probability(user_batch(users, query, items), all_items).double(), True
    rows = [empirical_counts(sampler, users[i : i + 1], query[i : i + 1], items, draws) for i in range(users.numel())]
    counts = torch.stack(rows)
    return torch.log(counts / counts.sum(1, keepdim=True)), False


def divergences(log_q: torch.Tensor, log_p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(KL(Q ‖ P), TV(Q, P)) per row, in float64; terms with Q = 0 contribute 0 to KL."""
    q, p = log_q.exp(), log_p.exp()
    kl = torch.where(q > 0, q * (log_q - log_p), torch.zeros_like(q)).sum(1)
    return kl, 0.5 * (q - p).abs().sum(1)


def divergence_table(
    views: list[ModelView],
    dataset,
    users: torch.Tensor,
    sampler_names: list[str],
    n_codewords: int,
    draws: int,
    seed: int,
) -> pd.DataFrame:
    """One row per (model state, sampler, user): kl, tv, and whether Q is exact or estimated from draws."""
    frames = []
    for view in views:
        log_p = torch.log_softmax(view.query.double() @ view.items.double().T, dim=1)
        for name in sampler_names:
            sampler = make_sampler(name, dataset, n_codewords, seed, view.items.device)
            sampler.rebuild(None, view.items)
            log_q, exact = proposal_log_probabilities(sampler, users, view.query, view.items, draws)
            kl, tv = divergences(log_q, log_p)
            frames.append(
                pd.DataFrame(
                    {
                        "model": view.name,
                        "sampler": name,
                        "user": users.cpu().numpy(),
                        "kl": kl.cpu().numpy(),
                        "tv": tv.cpu().numpy(),
                        "exact": exact,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def cumulative_curves(
    view: ModelView, dataset, user: torch.Tensor, sampler_names: list[str], n_codewords: int, draws: int, seed: int
) -> dict[str, torch.Tensor]:
    """Cumulative probability over items sorted by descending popularity: 'softmax' exact, samplers from draws."""
    order = torch.argsort(dataset.item_popularity.to(view.items.device), descending=True, stable=True)
    softmax = torch.softmax(view.query.double() @ view.items.double().T, dim=1)[0]
    curves = {"softmax": torch.cumsum(softmax[order], 0)}
    for name in sampler_names:
        sampler = make_sampler(name, dataset, n_codewords, seed, view.items.device)
        sampler.rebuild(None, view.items)
        counts = empirical_counts(sampler, user, view.query, view.items, draws)
        curves[name] = torch.cumsum(counts[order], 0) / draws
    return curves


def plot_figure2(panels: list[tuple[str, dict[str, torch.Tensor]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for axis, (title, curves) in zip(axes[0], panels, strict=True):
        for name, curve in curves.items():
            style = {"color": "black", "linewidth": 2.5} if name == "softmax" else {"linewidth": 1.2}
            axis.plot(range(1, curve.numel() + 1), curve.cpu().numpy(), label=name, **style)
        axis.set(title=title, xlabel="items sorted by popularity", ylabel="cumulative probability")
        axis.legend(fontsize=8)
    figure.tight_layout()
    save(figure, path)
    plt.close(figure)


def sample_users(dataset, n_users: int, seed: int, device: torch.device) -> torch.Tensor:
    candidates = torch.nonzero(dataset.train.row_lengths() > 0).flatten()
    if candidates.numel() == 0:
        raise RecxError("the dataset has no user with training items")
    generator = torch.Generator().manual_seed(seed)
    picked = candidates[torch.randperm(candidates.numel(), generator=generator)[:n_users].to(candidates.device)]
    return picked.sort().values.to(device)


@torch.no_grad()
def views_of(models: list[tuple[str, Model]], users: torch.Tensor) -> list[ModelView]:
    views = []
    for name, model in models:
        model.eval()
        query, items = model.representations(users)
        views.append(ModelView(name, query.detach(), items.detach()))
    return views


def check_names(names: list[str]) -> None:
    for name in names:
        SAMPLERS.get(name)
    if not names:
        raise RecxError("--sampler: name at least one sampler")


def load_run_models(folder: Path, device: torch.device):
    """(dataset, [('random init', model), ('trained', model)]) of a trained run: the random initialisation is the
    run's own (same seed), the trained one its saved weights."""
    config, dataset, trained = open_saved_run(folder, device)
    initial = build_model(config, dataset, device)
    return dataset, [("random init", initial), ("trained", trained)]


def diagnose_run(
    folder: Path,
    sampler_names: list[str],
    n_users: int,
    draws: int,
    n_codewords: int,
    seed: int,
    device: torch.device,
    figure: Path | None,
) -> pd.DataFrame:
    """The per-user divergence table (also written to FOLDER/sampler_diagnostics.csv) and, when asked, Figure 2."""
    check_names(sampler_names)
    dataset, models = load_run_models(folder, device)
    users = sample_users(dataset, n_users, seed, device)
    views = views_of(models, users)
    table = divergence_table(views, dataset, users, sampler_names, n_codewords, draws, seed)
    text = table.to_csv(index=False)
    write_artifact(folder, "sampler_diagnostics.csv", lambda path: path.write_text(text))
    if figure is not None:
        panels = [
            (
                f"{view.name} (user {int(users[0])})",
                cumulative_curves(
                    ModelView(view.name, view.query[:1], view.items),
                    dataset,
                    users[:1],
                    sampler_names,
                    n_codewords,
                    draws,
                    seed,
                ),
            )
            for view in views
        ]
        plot_figure2(panels, figure)
    return table
