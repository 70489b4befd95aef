"""ALS speed: recx WRMF against implicit's CPU ALS on Gowalla's training split (or a prepared dataset: --data-root,
--dataset), then RG² and RG× beside them.

Same start, factors, iterations, threads, α, λ and CG steps in one process, iterations interleaved so that both
see the same machine load; recx WRMF uses implicit's confidence (`confidence: scaled`, c = α on observed pairs)
so that both minimise the same loss. Prints seconds per iteration
(median over iterations, and mean), test NDCG@20 of both through recx's evaluator (training and validation items
excluded), and the ratio recx / implicit. On CUDA it also times recx WRMF on the GPU (implicit.gpu is absent: its
PyPI wheel has no CUDA build), against recx's CPU figure and the arithmetic floor per iteration: exact solves
2|D|d² + (M+N)d³/3 flops, CG (cg_steps + 1)(4|D|d + 2(M+N)d²).

A bench iteration is what `recx train`'s epoch runs (recx/training/runners/alternating.py): both half-steps, each
returning the loss the training loop records. With --through-cli R it then times that path itself (bench/through_cli.py):
R rounds of --iterations interleaved iterations (implicit, recx) of a fresh model followed by a real `recx train --model wrmf` of the
same settings for --iterations epochs, whose epochs.jsonl `seconds` are compared with both, paired by round; then
R rounds of --rg-iterations iterations of RG² and RG× against their own `recx train` runs.
Run by hand:  python bench/als_speed.py [--iterations 15] [--threads 2] [--factors 64] [--data-root R --dataset D]
                                        [--through-cli 3] [--quick]
`--quick` (make ci-bench-quick): tiny synthetic data (bench/quick.py), 16 factors, 2 iterations (RG: 1), one thread,
one round through the CLI.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import quick
import torch
from through_cli import interleaved

from recx.config.run_config import resolve
from recx.core.memory import keep_freed_memory
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.eval.evaluator import evaluate
from recx.models.registry import MODELS

GOWALLA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gowalla"


def recx_model(name: str, dataset, factors: int, args: dict):
    model_class = MODELS.get(name)
    torch.manual_seed(0)
    return model_class(dataset.n_users, dataset.n_items, factors, model_class.Args(**args))


def ndcg20(model, dataset) -> float:
    return evaluate(model, dataset, "test", [20]).values[("ndcg", 20, "all")]


class RecxIterations:
    """One WRMF/RG iteration (user then item half-step, each returning the loss after it, as the training loop records) at
    a time, timed on the model's device."""

    def __init__(self, model, dataset):
        self.model, self.problem = model, model.weighted_squares(dataset.train)
        self.synchronize = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)

    def __call__(self) -> float:
        self.synchronize()
        started = time.perf_counter()
        self.model.solve_users(self.problem)
        self.model.solve_items(self.problem)
        self.synchronize()
        return time.perf_counter() - started


class ImplicitIterations:
    """implicit's CPU ALS one iteration at a time (fit warm-starts from its current factors), timed by implicit's
    own callback (its solver calls only)."""

    def __init__(self, dataset, factors: int, threads: int, alpha: float, lam: float, start):
        import scipy.sparse as sp
        from implicit.cpu.als import AlternatingLeastSquares

        train = dataset.train
        self.matrix = sp.csr_matrix(
            (np.ones(train.nnz, dtype=np.float32), train.indices.numpy(), train.indptr.numpy()),
            shape=(dataset.n_users, dataset.n_items),
        )
        self.model = AlternatingLeastSquares(
            factors=factors,
            regularization=lam,
            alpha=alpha,
            iterations=1,
            num_threads=threads,
            calculate_training_loss=False,
        )
        self.model.user_factors = start.user_factors.data.numpy().copy()
        self.model.item_factors = start.item_factors.data.numpy().copy()

    def __call__(self) -> float:
        from threadpoolctl import threadpool_limits

        seconds = []
        with threadpool_limits(1, "blas"):  # implicit's advice: its own threads, single-threaded BLAS
            self.model.fit(self.matrix, show_progress=False, callback=lambda it, elapsed, loss: seconds.append(elapsed))
        return seconds[0]

    def as_recx(self, dataset, factors: int):
        model = recx_model("wrmf", dataset, factors, {})
        model.user_factors.data.copy_(torch.from_numpy(self.model.user_factors))
        model.item_factors.data.copy_(torch.from_numpy(self.model.item_factors))
        return model


def implicit_installed() -> bool:
    try:
        import implicit.cpu.als  # noqa: F401
        import threadpoolctl  # noqa: F401
    except ImportError:
        return False
    return True


def per_iteration(times: list[float]) -> str:
    return f"{statistics.median(times):.3f} s/iter (median; mean {statistics.mean(times):.3f})"


def floor_flops(dataset, factors: int, cg_steps: int) -> tuple[float, float]:
    nnz, rows = dataset.train.nnz, dataset.n_users + dataset.n_items
    exact = 2 * nnz * factors**2 + rows * factors**3 / 3
    cg = (cg_steps + 1) * (4 * nnz * factors + 2 * rows * factors**2)
    return exact, cg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--rg-iterations", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--factors", type=int, default=64)
    parser.add_argument("--alpha", type=float, default=40.0)
    parser.add_argument("--regularization", type=float, default=0.05)
    parser.add_argument("--source", type=Path, default=GOWALLA)
    parser.add_argument("--data-root", type=Path, default=None, help="a prepared dataset instead of --source")
    parser.add_argument("--dataset", default="gowalla", help="its name under --data-root (e.g. ml10m)")
    parser.add_argument(
        "--through-cli", type=int, default=0, metavar="ROUNDS", help="rounds of the bench against `recx train`"
    )
    quick.option(
        parser,
        data_root=lambda: quick.data_root("quick"),
        dataset="quick",
        factors=16,
        iterations=2,
        rg_iterations=1,
        threads=1,
        through_cli=1,
    )
    args = parser.parse_args()
    keep_freed_memory()  # as the recx command does (recx/memory.py)
    set_compute_threads(args.threads)
    with tempfile.TemporaryDirectory() as root:
        if args.data_root is None:
            args.data_root, args.dataset = Path(root), "gowalla"
            prepare("gowalla", PrepareOptions(format="lightgcn", source=args.source), args.data_root)
        compare(args, load_dataset(args.data_root, args.dataset))


def cli_config(args, model: str, model_args: dict, epochs: int):
    """The `recx train` configuration of the bench's work: the model and its arguments, `epochs` epochs, validated
    once after the last (validation is outside the recorded epoch times)."""
    raw = {"dataset": args.dataset, "model": model, "dim": args.factors, "epochs": epochs, "eval_every": epochs}
    return resolve({**raw, "device": "cpu", "model_args": model_args})


def fresh_epochs(args, dataset, name: str, model_args: dict, with_implicit: bool):
    """A `bench_epochs` for through_cli.interleaved: `epochs` iterations of a fresh model (seed 0, as `recx train`
    starts: a warm model's CG rows converge and skip steps, so later iterations are cheaper than a run's first), each
    after one iteration of implicit started from the same factors when `with_implicit`."""

    def epochs(count: int) -> tuple[list[float], dict[str, list[float]]]:
        model = recx_model(name, dataset, args.factors, model_args)
        step = RecxIterations(model, dataset)
        if not with_implicit:
            return [step() for _ in range(count)], {}
        theirs = ImplicitIterations(dataset, args.factors, args.threads, args.alpha, args.regularization, model)
        pairs = [(theirs(), step()) for _ in range(count)]
        return [ours for _, ours in pairs], {"implicit": [implicit for implicit, _ in pairs]}

    return epochs


def compare(args, dataset) -> None:
    print(
        f"{args.dataset} train: {dataset.n_users:,} users x {dataset.n_items:,} items, {dataset.train.nnz:,} interactions; "
        f"factors {args.factors}, {args.iterations} iterations, {args.threads} threads, alpha {args.alpha}, "
        f"lambda {args.regularization}, 3 CG steps"
    )
    wrmf_args = {"alpha": args.alpha, "regularization": args.regularization, "confidence": "scaled", "cg_steps": 3}
    wrmf = recx_model("wrmf", dataset, args.factors, wrmf_args)
    recx_step = RecxIterations(wrmf, dataset)
    implicit_times = None
    if implicit_installed():
        # same start; iterations interleaved (implicit, recx, implicit, ...) so that both see the same machine load
        implicit_step = ImplicitIterations(dataset, args.factors, args.threads, args.alpha, args.regularization, wrmf)
        pairs = [(implicit_step(), recx_step()) for _ in range(args.iterations)]
        implicit_times, recx_times = [i for i, _ in pairs], [r for _, r in pairs]
        implicit_ndcg = ndcg20(implicit_step.as_recx(dataset, args.factors), dataset)
    else:
        recx_times = [recx_step() for _ in range(args.iterations)]
    recx_ndcg = ndcg20(wrmf, dataset)
    print(f"recx WRMF (cpu):     {per_iteration(recx_times)}, test NDCG@20 {recx_ndcg:.4f}")
    if implicit_times is None:
        print("implicit ALS:        not installed (pip install implicit)")
    else:
        print(f"implicit ALS (cpu):  {per_iteration(implicit_times)}, test NDCG@20 {implicit_ndcg:.4f}")
        paired = statistics.median(r / i for i, r in pairs)
        print(
            f"ratio recx / implicit, time per iteration: "
            f"{statistics.median(recx_times) / statistics.median(implicit_times):.2f} (ratio of medians; median "
            f"of paired ratios {paired:.2f}); NDCG@20 difference {recx_ndcg - implicit_ndcg:+.4f}"
        )
    for name in ("rg2", "rgx"):
        model = recx_model(name, dataset, args.factors, {"cg_steps": 3})
        step = RecxIterations(model, dataset)
        times = [step() for _ in range(args.rg_iterations)]
        ratio = statistics.median(times) / statistics.median(recx_times)
        print(
            f"recx {name.upper():4s} (cpu):     {per_iteration(times)} over {args.rg_iterations} iterations, "
            f"ratio to recx WRMF {ratio:.2f}, test NDCG@20 {ndcg20(model, dataset):.4f} (default hyper-parameters)"
        )
    if args.through_cli:
        for name, model_args, epochs in (
            ("wrmf", wrmf_args, args.iterations),
            ("rg2", {"cg_steps": 3}, args.rg_iterations),
            ("rgx", {"cg_steps": 3}, args.rg_iterations),
        ):
            bench = fresh_epochs(args, dataset, name, model_args, name == "wrmf" and implicit_times is not None)
            config = cli_config(args, name, model_args, epochs)
            rounds = interleaved(bench, config, args.data_root, args.threads, args.through_cli)
            print(f"through the CLI, {name.upper()} ({epochs} epochs a run): {rounds.summary()}", flush=True)
    exact, cg = floor_flops(dataset, args.factors, 3)
    cpu_rate = cg / statistics.median(recx_times) / 1e9
    print(
        f"floor per iteration: exact {exact / 1e9:.2f} GFLOP, CG {cg / 1e9:.2f} GFLOP; "
        f"recx WRMF CPU achieves {cpu_rate:.1f} GFLOP/s of the CG floor"
    )
    if not torch.cuda.is_available():
        print("GPU: no CUDA device (implicit.gpu is not on PyPI with CUDA either)")
        return
    device = torch.device("cuda")
    on_gpu = dataset.to(device)
    for solver in ("cg", "cholesky"):
        model = recx_model("wrmf", dataset, args.factors, {**wrmf_args, "solver": solver}).to(device)
        step = RecxIterations(model, on_gpu)
        times = [step() for _ in range(args.iterations)]
        flops = cg if solver == "cg" else exact
        print(
            f"recx WRMF (cuda, {solver}): {per_iteration(times)}, test NDCG@20 {ndcg20(model, on_gpu):.4f}, "
            f"{statistics.median(recx_times) / statistics.median(times):.1f}x recx CPU, "
            f"{flops / statistics.median(times) / 1e9:.0f} GFLOP/s of its floor"
        )
    print("implicit.gpu: not available (implicit's PyPI wheel is CPU-only)")


if __name__ == "__main__":
    main()
