"""Each paper's training path in its headline setting against its compute floor, paired in one process (issue 44).

A path is one method of a `<paper>-headline` experiment (experiments.yaml) on its dataset, resolved exactly as
`recx sweep` resolves it (the first grid point where the method has a grid). recx's step is `train_step` on the
runner `recx train` builds (sampler, loss, optimizer, the run's batch size), over the run's own shuffled batches.
The floor is the same step written directly in plain torch: the model's two tables as leaf tensors, the method's
loss as its paper and official code define it (the cheapest formulation recx also uses, so the floor holds only
arithmetic), the draws by torch's own calls (torch.randint, torch.multinomial) and torch.optim.Adam with the run's
lr and coupled weight decay over the whole tables (the headline runs' `weight_decay_mode: full`): no registry, no
LossInput, no sampler objects, no checks. For the deterministic losses (DirectAU, MAWU, SSL-Pop) the floor's first
loss is checked against recx's on the same batch and parameters (printed), so both compute the same thing.

Rounds alternate recx and floor (`--steps` timed steps each, after two untimed ones; the order flips each round);
the epoch is the median step times the run's steps per epoch, the ratio the median of the rounds' paired ratios.
RG's SM row (`--paths rg-sm`, ML-10M, batch 2048, the first
weight-decay point) is an interaction path like the others. RG² and RG× (`--paths rg`, ML-10M, rg-headline's exact solves): one iteration (both half-steps) of recx's solver
against the plain-torch exact half-steps of as many rows of the mean length (a batched Gram, Cholesky and solve per
row), paired per round; seconds per iteration. Mult-VAE and FastVAE (`--paths fastvae`, Gowalla, 256 users a step): the
users runner's step against VAEFloor (FastVAE's floor draws uniform negatives: MIDX's draws are what it leaves out).

    python bench/paper_paths.py --data-root /work/data [--paths prism,bir,hns,rg,rg-sm,fastvae] [--steps 10] [--rounds 3]
                                [--threads 2] [--quick]

`--quick` (make ci-bench-quick): every path, one step, one round, one thread, on a tiny synthetic dataset prepared
under each of the paths' dataset names (bench/quick.py); the headline settings are kept (batches up to 4,096).
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
from pathlib import Path
from typing import Any, NamedTuple

import quick
import torch
import torch.nn.functional as F

from recx.core.memory import keep_freed_memory
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.sweeps.experiments import experiment_spec, load_experiments, plan
from recx.training.build import build_model
from recx.training.runners.interactions import InteractionEpochs
from recx.training.step import train_step, training_loss

PATHS = {
    "prism": [("prism-headline", method, "gowalla-prism") for method in ("directau+wd", "mawu+wd")],
    "bir": [("bir-headline", method, "gowalla-mat") for method in ("ssl-pop", "bir", "xir")],
    "hns": [("hns-headline", method, "gowalla-mat") for method in ("dns-m2", "softmax-v-rho1", "bpr-uniform")],
    "rg": [("rg-headline", method, "ml10m") for method in ("rg2", "rgx")],
    "rg-sm": [("rg-headline", "sm", "ml10m")],
    "fastvae": [("fastvae-headline", method, "gowalla-fastvae") for method in ("mult-vae", "fastvae-midx_pop")],
}
FLOOR_ROWS = 4096  # rows per chunk of the exact-solve floor


def headline_config(experiments: Path, name: str, method: str, dataset: str):
    spec = experiment_spec(load_experiments(experiments), name, experiments)
    narrowed = {**spec, "datasets": [dataset], "methods": {method: spec["methods"][method]}}
    return plan(narrowed, name, experiments)[0].config


def unit(rows):
    return F.normalize(rows, dim=-1)


def log_mean_exp_pairs(rows, t=2.0):
    """DirectAU's uniformity, log E_{a<b} exp(-t ||f(x_a) - f(x_b)||²), over the rows' distinct pairs."""
    x = unit(rows)
    logits = (2 * t * x @ x.T - 2 * t).fill_diagonal_(float("-inf"))
    n = x.shape[0]
    return torch.logsumexp(logits.flatten(), 0) - math.log(n * (n - 1))


def lower_triangle_uniformity(rows, t=2.0):
    """MAWU's released `uniformity_dot`: the mean over all n² entries of the strict lower triangle of the cosine
    matrix (zeroed entries count as distance² 2), then the log."""
    x = unit(rows)
    cosine = torch.tril(x @ x.T, diagonal=-1)
    return (2 * cosine - 2).mul(t).exp().mean().log()


def first_rows(table, ids):
    distinct = torch.unique(ids)
    return table[distinct]


class Floor:
    """The plain-torch step of one path: tables copied from recx's model at the start, Adam over them."""

    def __init__(self, config, dataset, model, loss_fn):
        users, items = model.dot_tables()
        self.user = users.detach().clone().requires_grad_()
        self.item = items.detach().clone().requires_grad_()
        self.params = [self.user, self.item]
        self.config, self.dataset = config, dataset
        counts = dataset.item_popularity.double()
        self.log_p = torch.log(counts / counts.sum()).float()
        self.kind = config.loss if config.loss in ("directau", "mawu", "full_softmax") else config.sampler
        if self.kind == "mawu":
            self.user_margin = torch.zeros(dataset.n_users, requires_grad=True)
            self.item_margin = torch.zeros(dataset.n_items, requires_grad=True)
            self.params += [self.user_margin, self.item_margin]
        if self.kind == "xir":
            self.occurrence = torch.ones(dataset.n_items, dtype=torch.float64)
            self.cache = None
        self.optimizer = torch.optim.Adam(self.params, lr=config.lr, weight_decay=config.weight_decay)
        self.loss = getattr(self, self.kind.replace("in_batch_pop", "ssl_pop"))

    def step(self, users, positives):
        loss = self.loss(users, positives)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def directau(self, users, positives):
        u, i = self.user[users], self.item[positives]
        align = (unit(u) - unit(i)).pow(2).sum(-1).mean()
        spread = log_mean_exp_pairs(first_rows(self.user, users)) + log_mean_exp_pairs(first_rows(self.item, positives))
        return align + self.config.loss_args["gamma"] * spread / 2

    def mawu(self, users, positives):
        args = self.config.loss_args
        u, i = self.user[users], self.item[positives]
        cosine = (unit(u) * unit(i)).sum(-1).clamp(-1 + 1e-7, 1 - 1e-7)
        angle = torch.arccos(cosine)
        user_at, item_at = torch.unique(users, return_inverse=True)[1], torch.unique(positives, return_inverse=True)[1]
        margin = 1 - torch.sigmoid(self.user_margin[user_at] + self.item_margin[item_at])
        with torch.no_grad():
            self.user_margin.clamp_(0, 1)
            self.item_margin.clamp_(0, 1)
        m = torch.sort(margin).values  # -mean_{a,b} cos(min(θ_b + m_a, π)) by prefix sums over the sorted margins
        cos_sums = F.pad(torch.cumsum(torch.cos(m), 0), (1, 0))
        sin_sums = F.pad(torch.cumsum(torch.sin(m), 0), (1, 0))
        k = torch.searchsorted(m.detach(), (math.pi - angle).detach(), right=True)
        inside = torch.cos(angle) * cos_sums[k] - torch.sin(angle) * sin_sums[k]
        n = angle.numel() ** 2
        align = -(inside.sum() - (n - k.sum())) / n
        spread_u = lower_triangle_uniformity(first_rows(self.user, users))
        spread_i = lower_triangle_uniformity(first_rows(self.item, positives))
        return align + args["gamma_user"] * spread_u + args["gamma_item"] * spread_i

    def full_softmax(self, users, positives):
        """RG's SM row: the softmax over every item of dot scores (temperature 1), the batch's mean."""
        scores = self.user[users] @ self.item.T
        return (torch.logsumexp(scores, 1) - scores.gather(1, positives[:, None]).squeeze(1)).mean()

    def ssl_pop(self, users, positives):
        logits = self.user[users] @ self.item[positives].T - self.log_p[positives][None, :]
        return F.cross_entropy(logits, torch.arange(users.numel()))

    def resampled_ce(self, u, positives, candidates, m, score_positive):
        """CE(positive; m draws ∝ softmax(s - log p) over `candidates`), the draws' counts as log multiplicities."""
        scores = u @ self.item[candidates].T
        with torch.no_grad():
            weights = torch.softmax(scores - self.log_p[candidates][None, :], dim=1)
            drawn = torch.multinomial(weights, m, replacement=True)
            counts = torch.zeros_like(scores).scatter_add_(1, drawn, torch.ones_like(drawn, dtype=scores.dtype))
        logits = torch.cat([score_positive[:, None], scores + counts.log()], dim=1)
        return (torch.logsumexp(logits, 1) - score_positive).mean(), drawn, counts

    def bir(self, users, positives):
        u = self.user[users]
        score_positive = (u * self.item[positives]).sum(-1)
        return self.resampled_ce(u, positives, positives, positives.numel(), score_positive)[0]

    def xir(self, users, positives):
        u, size = self.user[users], positives.numel()
        if self.cache is None:
            trained = (self.dataset.item_popularity > 0).double()
            self.cache = torch.multinomial(trained, size, replacement=True)
        share, half = self.config.sampler_args["cache_weight"], size // 2
        score_positive = (u * self.item[positives]).sum(-1)
        on_batch, _, batch_counts = self.resampled_ce(u, positives, positives, half, score_positive)
        on_cache, _, cache_counts = self.resampled_ce(u, positives, self.cache, half, score_positive)
        atoms = torch.cat([positives, self.cache])
        drawn = torch.zeros_like(self.occurrence).index_add_(
            0, atoms, torch.cat([batch_counts, cache_counts], 1).sum(0).double()
        )
        self.occurrence += drawn
        self.cache = torch.multinomial(self.occurrence * (drawn > 0), size, replacement=True)
        return share * on_cache + (1 - share) * on_batch

    def candidates(self, users, n):
        u = self.user[users]
        items = torch.randint(self.dataset.n_items, (users.numel(), n))
        return u, items

    def dns(self, users, positives):
        u, items = self.candidates(users, self.config.sampler_args["n_candidates"])
        with torch.no_grad():
            top = torch.einsum("bd,bnd->bn", u, self.item[items]).topk(self.config.sampler_args["m"], 1).indices
        negatives = items.gather(1, top)
        score_positive = (u * self.item[positives]).sum(-1)
        scores = torch.einsum("bd,bnd->bn", u, self.item[negatives])
        return F.softplus(scores - score_positive[:, None]).sum()

    def softmax_v(self, users, positives):
        u, items = self.candidates(users, self.config.sampler_args["n_candidates"])
        score_positive = (u * self.item[positives]).sum(-1)
        pairwise = F.softplus(torch.einsum("bd,bnd->bn", u, self.item[items]) - score_positive[:, None])
        with torch.no_grad():
            tau = torch.sqrt(pairwise.var(dim=1, keepdim=True) / (2 * self.config.sampler_args["rho"]))
            weights = torch.softmax(pairwise / tau, dim=1)
        return (weights * pairwise).sum()

    def uniform(self, users, positives):
        u, items = self.candidates(users, 1)
        score_positive = (u * self.item[positives]).sum(-1)
        return F.softplus((u * self.item[items[:, 0]]).sum(-1) - score_positive).sum()


def timed(step, batches) -> float:
    """Median seconds of one step over `batches` (each a tuple of the step's arguments; the first two untimed)."""
    times = []
    for index, batch in enumerate(batches):
        started = time.perf_counter()
        step(*batch)
        if index >= 2:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def paired(ours, theirs, batches, rounds: int) -> list[tuple[float, float]]:
    """(recx's, the floor's) median step seconds per round over the same batches, the order flipped each round."""
    pairs = []
    for round_ in range(rounds):
        if round_ % 2 == 0:
            mine, floor = timed(ours, batches), timed(theirs, batches)
        else:
            floor, mine = timed(theirs, batches), timed(ours, batches)
        pairs.append((mine, floor))
    return pairs


class InteractionPath(NamedTuple):
    config: Any
    model: Any
    runner: InteractionEpochs
    floor: Floor
    batches: list[tuple[torch.Tensor, torch.Tensor]]

    def recx_step(self, users: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        return runner_step(self.runner, users, positives)


def runner_step(runner, users: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """`train_step` on an interactions runner as `recx train` builds it: the step of InteractionEpochs.train_epoch."""
    return train_step(runner.model, runner.sampler, runner.loss_fn, runner.optimizer, runner.config, users, positives)


def run_batches(runner, size: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first `count` (users, positives) batches of `size` of the runner's training interactions in one shuffled
    order (seed 1)."""
    order = torch.randperm(runner.items_of.numel(), generator=torch.Generator().manual_seed(1))
    return [
        (runner.users_of[order[s * size : (s + 1) * size]], runner.items_of[order[s * size : (s + 1) * size]])
        for s in range(count)
    ]


def interaction_path(data_root, experiments, name, method, dataset_name, n_batches: int) -> InteractionPath:
    """The path's config, model and runner as `recx sweep` builds them, the Floor from the same model, and
    `n_batches` of the run's own shuffled batches."""
    config = headline_config(experiments, name, method, dataset_name)
    dataset = load_dataset(data_root, dataset_name)
    model = build_model(config, dataset, torch.device("cpu"))
    runner = InteractionEpochs(config, dataset, model, torch.Generator().manual_seed(config.seed))
    floor = Floor(config, dataset, model, runner.loss_fn)
    return InteractionPath(config, model, runner, floor, run_batches(runner, config.batch_size, n_batches))


def bench_path(data_root, experiments, name, method, dataset_name, steps, rounds) -> dict:
    """`steps` steps of `train_step` and of the plain-torch Floor, paired in `rounds`; per epoch."""
    path = interaction_path(data_root, experiments, name, method, dataset_name, steps + 2)
    config, model, runner, floor, batches = path
    check = None
    if floor.kind in ("directau", "mawu", "in_batch_pop", "full_softmax"):
        ours = training_loss(model, runner.sampler, runner.loss_fn, config, *batches[0]).item()
        theirs = floor.loss(*batches[0]).item()
        check = abs(ours - theirs) / max(abs(theirs), 1e-12)
    pairs = paired(path.recx_step, floor.step, batches, rounds)
    n_steps = runner.n_steps
    return {
        "path": f"{name} {method}",
        "optimizer": config.optimizer,
        "recx": statistics.median(p[0] for p in pairs) * n_steps,
        "floor": statistics.median(p[1] for p in pairs) * n_steps,
        "ratio": statistics.median(p[0] / p[1] for p in pairs),
        "check": check,
    }


def exact_half_step_floor(n_rows: int, length: int, dim: int) -> float:
    """Seconds of the plain-torch exact half-step of `n_rows` rows of `length` interactions each: per row the Gram
    of its items' factors (torch.bmm, 2 L d² flops) plus a shared Gram term, a Cholesky factorisation and solve
    (torch.linalg), in chunks of FLOOR_ROWS rows; the factors are random (the arithmetic does not depend on them)."""
    started = time.perf_counter()
    shared = torch.eye(dim) * length
    for start in range(0, n_rows, FLOOR_ROWS):
        rows = min(FLOOR_ROWS, n_rows - start)
        gathered = torch.randn(rows, length, dim)
        systems = torch.baddbmm(shared.expand(rows, -1, -1), gathered.transpose(1, 2), gathered)
        right = gathered.sum(1, keepdim=True).transpose(1, 2)
        torch.cholesky_solve(right, torch.linalg.cholesky(systems))
    return time.perf_counter() - started


def alternating_path(data_root, experiments, name, method, dataset_name):
    """(an RG iteration as `recx train` runs it (als_speed.RecxIterations: user then item half-step), the floor: the
    plain-torch exact half-steps of as many rows of the mean lengths (`exact_half_step_floor`)); each returns its
    seconds."""
    from als_speed import RecxIterations

    config = headline_config(experiments, name, method, dataset_name)
    dataset = load_dataset(data_root, dataset_name)
    model = build_model(config, dataset, torch.device("cpu"))
    iteration = RecxIterations(model, dataset)
    nnz, users, items = dataset.train.nnz, dataset.n_users, dataset.n_items
    floor = lambda: sum(  # noqa: E731
        exact_half_step_floor(rows, max(1, round(nnz / rows)), config.dim) for rows in (users, items)
    )
    return iteration, floor


def bench_alternating(data_root, experiments, name, method, dataset_name, rounds) -> dict:
    """An RG iteration (user then item half-step, exact solves) as `recx train` runs it, against the floor of the
    same rows and mean lengths (`exact_half_step_floor`), paired in rounds."""
    iteration, floor = alternating_path(data_root, experiments, name, method, dataset_name)
    iteration()
    pairs = [(iteration(), floor()) for _ in range(rounds)]
    return {
        "path": f"{name} {method}",
        "optimizer": "exact",
        "recx": statistics.median(p[0] for p in pairs),
        "floor": statistics.median(p[1] for p in pairs),
        "ratio": statistics.median(p[0] / p[1] for p in pairs),
        "check": None,
    }


class VAEFloor:
    """Mult-VAE / FastVAE's step in plain torch from a copy of recx's model: the histories' embedding bag (each row
    1/√|I_u|), dropout on the hidden layer, ReLU, the linear posterior, the reparameterised decode, then the full
    softmax over every item (Mult-VAE, with its item bias) or the sampled softmax over `n_negatives` uniform draws a
    user scored by the same [B, M] product and a gather (FastVAE on a catalogue this size: the MIDX draws and their
    log q left out, the floor's only omission); the KL weight is 0 (anneal_cap 0), Adam (fused) with the run's decay."""

    def __init__(self, config, dataset, model):
        self.params = {name: value.detach().clone().requires_grad_() for name, value in model.named_parameters()}
        self.indptr, self.items = dataset.train.indptr, dataset.train.indices
        self.n_items, self.sampled = dataset.n_items, config.model == "fastvae"
        self.n_negatives = config.n_negatives
        self.optimizer = torch.optim.Adam(
            list(self.params.values()), lr=config.lr, weight_decay=config.weight_decay, fused=True
        )

    def step(self, users):
        p = self.params
        starts, lengths = self.indptr[users], self.indptr[users + 1] - self.indptr[users]
        rows = torch.repeat_interleave(torch.arange(users.numel()), lengths)
        positions = starts[rows] + torch.arange(rows.numel()) - (torch.cumsum(lengths, 0) - lengths)[rows]
        items = self.items[positions]
        weights = lengths.double().rsqrt().float()[rows]
        hidden = F.embedding_bag(
            items, p["encoder_in"], torch.cumsum(lengths, 0) - lengths, mode="sum", per_sample_weights=weights
        )
        hidden = F.dropout(hidden, 0.5)
        mu, log_var = F.linear(F.relu(hidden), p["encoder_out.weight"], p["encoder_out.bias"]).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
        query = F.linear(z, p["decoder.weight"], p["decoder.bias"])
        scores = query @ p["items"].T
        if not self.sampled:
            scores = scores + p["item_bias"]
            loss = (torch.logsumexp(scores, 1)[rows] - scores[rows, items]).sum()
        else:
            negatives = torch.randint(self.n_items, (users.numel(), self.n_negatives))
            lse = torch.logsumexp(scores.gather(1, negatives), 1)[rows]
            positive = scores[rows, items]
            loss = (torch.logaddexp(positive, lse) - positive).sum()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


class UsersPath(NamedTuple):
    config: Any
    runner: Any
    floor: VAEFloor
    batches: list[tuple[torch.Tensor]]
    rebuild: float  # seconds of the sampler's per-epoch rebuild (MIDX's codebooks), 0 without a sampler

    def recx_step(self, users: torch.Tensor, nnz: int | None = None) -> None:
        """The body of UserEpochs.train_epoch's loop, the loss record aside (`nnz`: the users' training items, which
        the epoch reads once for all its steps; None: read here)."""
        runner = self.runner
        objective = runner.batch_objective(users, nnz)
        runner.clear_gradients()
        objective.backward()
        runner.optimizer.step()
        runner.updates += 1


def users_path(data_root, experiments, name, method, dataset_name, n_batches: int) -> UsersPath:
    """The users runner as `recx sweep` builds it (its sampler rebuilt once, as at an epoch's start), VAEFloor from
    the same model, and `n_batches` user batches in one shuffled order (seed 1)."""
    from recx.training.runners.users import UserEpochs

    config = headline_config(experiments, name, method, dataset_name)
    dataset = load_dataset(data_root, dataset_name)
    model = build_model(config, dataset, torch.device("cpu"))
    runner = UserEpochs(config, dataset, model, torch.Generator().manual_seed(config.seed))
    floor = VAEFloor(config, dataset, model)
    rebuild = 0.0
    if runner.sampler is not None:
        started = time.perf_counter()
        runner.sampler.rebuild(None, model.item_table())
        rebuild = time.perf_counter() - started
    order = runner.users[torch.randperm(runner.users.numel(), generator=torch.Generator().manual_seed(1))]
    size = config.batch_size
    batches = [(order[s * size : (s + 1) * size],) for s in range(n_batches)]
    return UsersPath(config, runner, floor, batches, rebuild)


def bench_users(data_root, experiments, name, method, dataset_name, steps, rounds) -> dict:
    """`steps` user batches of the users runner (the loop body of UserEpochs.train_epoch) and of VAEFloor, paired
    in `rounds`; per epoch, FastVAE's per-epoch sampler rebuild (MIDX's codebooks) added to recx's figure."""
    path = users_path(data_root, experiments, name, method, dataset_name, steps + 2)
    pairs = paired(path.recx_step, path.floor.step, path.batches, rounds)
    n_steps, rebuild = path.runner.n_steps, path.rebuild
    return {
        "path": f"{name} {method}",
        "optimizer": path.config.optimizer,
        "recx": statistics.median(p[0] for p in pairs) * n_steps + rebuild,
        "floor": statistics.median(p[1] for p in pairs) * n_steps,
        "ratio": statistics.median((p[0] * n_steps + rebuild) / (p[1] * n_steps) for p in pairs),
        "check": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--experiments", type=Path, default=Path("experiments.yaml"))
    parser.add_argument("--paths", default="prism,bir,hns")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    quick.option(
        parser,
        data_root=lambda: quick.data_root(*sorted({d for rows in PATHS.values() for _, _, d in rows}), n_users=1_000),
        paths=",".join(PATHS),
        steps=1,
        rounds=1,
        threads=1,
    )
    options = parser.parse_args()
    keep_freed_memory()
    set_compute_threads(options.threads)
    print(f"{options.threads} thread(s), {options.steps} steps x {options.rounds} rounds per path")
    print(f"{'path':34s} {'optimizer':>10s} {'recx s/epoch':>13s} {'floor s/epoch':>14s} {'recx/floor':>11s}  check")
    print("(rg: seconds per iteration, both half-steps)")
    for paper in options.paths.split(","):
        for name, method, dataset in PATHS[paper]:
            bench = {"rg": bench_alternating, "fastvae": functools.partial(bench_users, steps=options.steps)}.get(
                paper, functools.partial(bench_path, steps=options.steps)
            )
            row = bench(options.data_root, options.experiments, name, method, dataset, rounds=options.rounds)
            check = "" if row["check"] is None else f"first loss rel. diff {row['check']:.1e}"
            print(
                f"{row['path']:34s} {row['optimizer']:>10s} {row['recx']:13.1f} {row['floor']:14.1f} "
                f"{row['ratio']:11.2f}  {check}",
                flush=True,
            )


if __name__ == "__main__":
    main()
