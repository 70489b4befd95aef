"""Benchmark: seconds per training epoch on Gowalla (MF, dim 64, batch 2048) next to implicit's BPR epoch and the
bare matmul floor of the same shapes, all in this process with the same number of threads.

Cases (the training loop's own runner, optimizer as `recx train` resolves it (the loss's default bundle) unless --optimizer is given):
  BPR, uniform, 1 negative;  BPR, DNS(5, 100);  sampled softmax, 2000 uniform negatives shared by the batch (the
  MF cases); LightGCN, Mult-VAE and FastVAE with their defaults (`--cases lightgcn,multvae,fastvae`; no floor, no
  implicit).
Baselines: implicit 0.7.3's BPR (64 factors, one iteration = one epoch over the training interactions; an optional
bench dependency: `pip install implicit`), its epochs interleaved with the case's (one implicit epoch, warm-started
from its factors, before each timed epoch of the case), so that both see the same machine load; the ratio printed is
the median of the paired ratios. And the floor: forward and backward of the step's score products alone
(per-query dot products for BPR, the [B, d] x [d, 2000] product for sampled softmax) on random tensors, one floor
epoch before each timed epoch too, its ratio the median of the paired ratios. With 4 or more epochs the quartiles of
the paired ratios follow in brackets (this VM's speed drifts by up to 2x between minutes).
On CUDA it also counts host syncs inside an epoch with torch's sync debug mode (each synchronising call warns).

With --through-cli R it then times, for each case, the path a user times (bench/through_cli.py): R rounds of --epochs
timed epochs of the case (each after the baselines' epochs, as above) followed by a real `recx train` of the same
resolved configuration for --epochs epochs, whose epochs.jsonl `seconds` are compared with the bench's epochs (and
implicit's), paired by round: the bench and the user's path can no longer drift apart unseen.

With --quality N it then trains the BPR case and implicit's BPR for N epochs each and prints both models' test
NDCG@20 through recx's evaluator (implicit's factors carry its item bias as a last column: an MF of d + 1).

    python bench/train_speed.py --data-root /tmp/speed-data [--threads 1] [--epochs 1] [--optimizer lazy_adam]
                                [--cases bpr,dns,softmax] [--device cuda] [--quality 10] [--through-cli 3] [--quick]

`--quick` (make ci-bench-quick): tiny synthetic data (bench/quick.py), every case for one epoch, one round of the
first case through the CLI and the quality comparison after one epoch.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
import warnings
from pathlib import Path

import quick
import torch
from through_cli import interleaved

from recx.config.run_config import resolve
from recx.core.device import resolve_device
from recx.core.memory import keep_freed_memory
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.eval.evaluator import evaluate
from recx.training.build import build_model
from recx.training.runners.interactions import InteractionEpochs
from recx.training.runners.registry import RUNNERS

CASES = {
    "bpr": ("bpr, uniform, 1 negative", {"loss": "bpr", "sampler": "uniform", "n_negatives": 1}),
    "dns": ("bpr, dns(5 of 100)", {"loss": "bpr", "sampler": "dns", "sampler_args": {"m": 5, "n_candidates": 100}}),
    "softmax": (
        "softmax, uniform, 2000 shared",
        {"loss": "softmax", "sampler": "uniform", "n_negatives": 2000, "sampler_args": {"shared": True}},
    ),
    "lightgcn": ("lightgcn (defaults)", {"model": "lightgcn"}),
    "multvae": ("mult-vae (defaults)", {"model": "multvae"}),
    "fastvae": ("fastvae (defaults)", {"model": "fastvae"}),
}

FLOOR_SHARED = {"bpr": None, "softmax": 2000}  # each MF case's loss -> its floor's shared items (None: B dot products)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def case_config(raw: dict, optimizer: str, device: torch.device, dataset: str = "gowalla", epochs: int = 30):
    """The case's resolved config (validated once, after the last of `epochs`: the training loop's validation is outside
    its epoch times); `auto` leaves the optimizer to the loss's default bundle, as `recx train` does."""
    chosen = {} if optimizer == "auto" else {"optimizer": optimizer}
    common = {"model": "mf", "dim": 64, "batch_size": 2048, "device": device.type, "dataset": dataset}
    return resolve({**common, "epochs": epochs, "eval_every": epochs, **raw, **chosen})


def epoch_seconds(
    config, dataset, device: torch.device, epochs: int, count_syncs: bool = False, baselines=None
) -> tuple[list[float], int | None, dict[str, list[float]]]:
    """(seconds of each timed epoch (on CUDA after a warm-up epoch), host syncs inside an epoch on CUDA, for each
    baseline of `baselines` (name: a callable timing one of its epochs) the seconds of the epoch it ran just before
    each timed epoch)."""
    model = build_model(config, dataset, device)
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator(device=device).manual_seed(0))
    losses = torch.zeros(runner.n_steps, device=device)
    if device.type == "cuda":
        runner.train_epoch(0, losses, lambda step: None)
    baselines = baselines or {}
    times, baseline_times = [], {name: [] for name in baselines}
    for epoch in range(epochs):
        for name, baseline in baselines.items():
            baseline_times[name].append(baseline())
        synchronize(device)
        started = time.perf_counter()
        runner.train_epoch(epoch + 1, losses, lambda step: None)
        synchronize(device)
        times.append(time.perf_counter() - started)
    syncs = None
    if count_syncs:
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runner.train_epoch(epochs + 1, losses, lambda step: None)
        torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchronizing CUDA operation" in str(w.message) for w in caught)  # not the "prototype" notice
    assert torch.isfinite(losses).all()
    return times, syncs, baseline_times


def timed_epochs(config, dataset, device: torch.device, baselines: dict, epochs: int):
    """`epochs` timed epochs of a fresh model and runner, and each baseline's epochs before them (`epoch_seconds`)."""
    times, _, theirs = epoch_seconds(config, dataset, device, epochs, baselines=baselines)
    return times, theirs


def floor_step(batch: int, dim: int, n_shared: int | None, device: torch.device):
    """One step of the floor as a callable: forward + backward of the score products alone on random tensors, B dot
    products (n_shared None) or [B, d] x [d, n]."""
    query = torch.randn(batch, dim, device=device, requires_grad=True)
    items = torch.randn(n_shared or 2 * batch, dim, device=device, requires_grad=True)

    def step():
        scores = query @ items.T if n_shared else (query * items[:batch]).sum(-1) - (query * items[batch:]).sum(-1)
        scores.sum().backward()

    return step


def floor_epoch(n_steps: int, batch: int, dim: int, n_shared: int | None, device: torch.device):
    """A callable timing one epoch (`n_steps` steps) of the floor (`floor_step`)."""
    step = floor_step(batch, dim, n_shared, device)

    def epoch() -> float:
        synchronize(device)
        started = time.perf_counter()
        for _ in range(n_steps):
            step()
        synchronize(device)
        return time.perf_counter() - started

    step()
    return epoch


def case_baselines(raw: dict, floors: dict, implicit_epochs) -> dict:
    """The baselines of an MF case: the floor of its loss's products and implicit's BPR epoch (when installed)."""
    if raw.get("model", "mf") != "mf":
        return {}
    baselines = {"floor": floors[raw["loss"]]}
    if implicit_epochs is not None:
        baselines["implicit"] = implicit_epochs
    return baselines


def paired(ours: list[float], theirs: list[float]) -> str:
    """The median of the paired ratios ours/theirs, and their quartiles when there are at least 4 pairs."""
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    if len(ratios) < 4:
        return f"{statistics.median(ratios):.2f}"
    low, middle, high = statistics.quantiles(ratios, n=4)
    return f"{middle:.2f} [{low:.2f}-{high:.2f}]"


class ImplicitEpochs:
    """implicit's CPU BPR one epoch at a time: `fit` with one iteration warm-starts from its current factors."""

    def __init__(self, dataset, threads: int):
        import scipy.sparse
        from implicit.cpu.bpr import BayesianPersonalizedRanking

        train = dataset.train.to("cpu")
        self.matrix = scipy.sparse.csr_matrix(
            (torch.ones(train.nnz).numpy(), train.indices.numpy(), train.indptr.numpy()),
            shape=(dataset.n_users, dataset.n_items),
        )
        self.model = BayesianPersonalizedRanking(factors=64, iterations=1, num_threads=threads, random_state=0)
        self()  # warm-up: the factors are allocated on the first fit

    def __call__(self) -> float:
        started = time.perf_counter()
        self.model.fit(self.matrix, show_progress=False)
        return time.perf_counter() - started


def implicit_installed() -> bool:
    try:
        import implicit.cpu.bpr  # noqa: F401
        import scipy.sparse  # noqa: F401
    except ImportError:
        return False
    return True


def quality(dataset, optimizer: str, threads: int, epochs: int) -> tuple[float, float]:
    """(recx's, implicit's) test NDCG@20 after `epochs` epochs of BPR (uniform, 1 negative; MF d 64) on the CPU."""
    import scipy.sparse
    from implicit.cpu.bpr import BayesianPersonalizedRanking

    device = torch.device("cpu")
    config = case_config(CASES["bpr"][1], optimizer, device)
    model = build_model(config, dataset, device)
    runner = InteractionEpochs(config, dataset, model, torch.Generator().manual_seed(0))
    losses = torch.zeros(runner.n_steps)
    for epoch in range(1, epochs + 1):
        runner.train_epoch(epoch, losses, lambda step: None)
    train = dataset.train
    matrix = scipy.sparse.csr_matrix(
        (torch.ones(train.nnz).numpy(), train.indices.numpy(), train.indptr.numpy()),
        shape=(dataset.n_users, dataset.n_items),
    )
    reference = BayesianPersonalizedRanking(factors=64, iterations=epochs, num_threads=threads, random_state=0)
    reference.fit(matrix, show_progress=False)
    theirs = build_model(resolve({"model": "mf", "dim": reference.user_factors.shape[1]}), dataset, device)
    theirs.user_embedding.data.copy_(torch.from_numpy(reference.user_factors))
    theirs.item_embedding.data.copy_(torch.from_numpy(reference.item_factors))
    return ndcg20(model, dataset), ndcg20(theirs, dataset)


def ndcg20(model, dataset) -> float:
    return evaluate(model, dataset, "test", [20]).values[("ndcg", 20, "all")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--dataset", default="gowalla")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--epochs", type=int, default=1, help="timed epochs per case, each after an epoch of every baseline (medians)"
    )
    parser.add_argument("--optimizer", default="auto")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--quality", type=int, default=0, help="epochs of the NDCG@20 comparison with implicit")
    parser.add_argument(
        "--through-cli", type=int, default=0, metavar="ROUNDS", help="rounds of the case against `recx train`"
    )
    quick.option(parser, data_root=lambda: quick.data_root("quick"), dataset="quick", quality=1, through_cli=1)
    options = parser.parse_args()
    keep_freed_memory()  # as the recx command does (recx/memory.py)
    set_compute_threads(options.threads)
    device = resolve_device(options.device)
    dataset = load_dataset(options.data_root, options.dataset).to(device)
    n_steps = math.ceil(dataset.train.nnz / 2048)
    print(
        f"{options.dataset}: {dataset.n_users:,} users, {dataset.n_items:,} items, {dataset.train.nnz:,} training "
        f"interactions; MF dim 64, batch 2048 ({n_steps} steps); {device}, {options.threads} thread(s); "
        f"optimizer {options.optimizer}"
    )
    implicit_epochs = (
        ImplicitEpochs(dataset, options.threads) if device.type == "cpu" and implicit_installed() else None
    )
    if implicit_epochs is None:
        print("implicit BPR: not installed (pip install implicit) or not on CPU; skipped", flush=True)
    floors = {loss: floor_epoch(n_steps, 2048, 64, n_shared, device) for loss, n_shared in FLOOR_SHARED.items()}
    print(
        f"{'case':32s} {'optimizer':>15s} {'s/epoch':>8s} {'floor':>8s} {'/floor':>17s} {'implicit':>9s} "
        f"{'/implicit':>17s}"
    )
    cases = [CASES[key] for key in options.cases.split(",")]
    column = lambda times, theirs: (  # noqa: E731
        f"{statistics.median(theirs):8.3f} {paired(times, theirs):>17s}" if theirs else f"{'-':>8s} {'-':>17s}"
    )
    for name, raw in cases:
        config = case_config(raw, options.optimizer, device, options.dataset)
        baselines = case_baselines(raw, floors, implicit_epochs)
        times, _, theirs = epoch_seconds(config, dataset, device, options.epochs, baselines=baselines)
        print(
            f"{name:32s} {config.optimizer:>15s} {statistics.median(times):8.3f} "
            f"{column(times, theirs.get('floor'))} {column(times, theirs.get('implicit'))}",
            flush=True,
        )
    for name, raw in (cases[:1] if options.quick else cases) if options.through_cli else []:
        config = case_config(raw, options.optimizer, device, options.dataset, options.epochs)
        baselines = {
            key: value for key, value in case_baselines(raw, floors, implicit_epochs).items() if key != "floor"
        }
        bench = functools.partial(timed_epochs, config, dataset, device, baselines)
        rounds = interleaved(bench, config, options.data_root, options.threads, options.through_cli)
        print(f"through the CLI, {name}: {rounds.summary()}", flush=True)
    if options.quality and device.type == "cpu":
        ours, theirs = quality(dataset, options.optimizer, options.threads, options.quality)
        print(f"test NDCG@20 after {options.quality} epochs: recx {ours:.4f}, implicit {theirs:.4f}", flush=True)
    if device.type == "cuda":
        for name, raw in cases:
            config = case_config(raw, options.optimizer, device)
            times, syncs, _ = epoch_seconds(config, dataset, device, 1, True)
            print(f"cuda {name:27s} {times[0]:8.3f} s/epoch, host syncs inside an epoch: {syncs}")
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
