"""Golden k-means of the FastVAE paper's official code on an input where its stopping rule decides (issue 57)
-> tests/golden/official/fastvae_kmeans.json.

    python3 bench/official/fastvae_kmeans.py --repo FASTVAE_CHECKOUT [--out tests/golden/official/fastvae_kmeans.json]

FASTVAE_CHECKOUT is a checkout of HERECJ/FastVae_Gpu or a bare mirror (its Python files at HEAD are then extracted
to a temporary folder). The unmodified `sampler_gpu_mm.kmeans(X, K)` (max_iter 300, as `MidxUniform.__init__` calls
it) clusters 46 points of the plane into K = 6, CPU, float64, under torch.manual_seed(SEED): 40 points from N(0, I)
and 6 from N((1000, 0), 100² I), rounded to 3 decimals (numpy's default_rng(SEED)). The far, wide group keeps one
centroid and its squared error dominates the loss L (~2e5), so that the official rule, stop when
L_prev - L < L_prev · 1e-6 (sampler_gpu_mm.py:30), stops on a decrease of ~0.1, while an absolute rule
L_prev - L < 1e-6 runs on to other centroids and assignments (checked here).

Recorded: the start (the first K entries of the call's first `torch.randperm`; the later ones re-seed empty
clusters, none empties: checked), the centroids and assignments the call returns and its passes (the lines it prints
with `verbose`; the last pass assigns and stops). Each rule's outcome is read off the official Lloyd passes, each an
unmodified `kmeans(X, C, max_iter=1)` (assign, then update C) chained from the start: the relative rule on their
losses must give the call's result (checked), and the absolute rule must stop at another pass with other centroids
and assignments (asserted); the losses and the absolute rule's passes are stored too. sklearn (imported by
sampler_gpu_mm.py, unused here) is stubbed when missing (fastvae_loop.py's `stub_modules`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from checkout import checkout
from fastvae_loop import stub_modules

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "fastvae_kmeans.json"
SEED, N_NEAR, N_FAR, K = 511, 40, 6, 6
TOLERANCE = 1e-6  # sampler_gpu_mm.py:30


def make_points() -> torch.Tensor:
    rng = np.random.default_rng(SEED)
    near = rng.normal(0.0, 1.0, (N_NEAR, 2))
    far = rng.normal((1000.0, 0.0), 100.0, (N_FAR, 2))
    return torch.tensor(np.round(np.vstack([near, far]), 3))


class Draws:
    """`torch.randperm` as the official kmeans calls it: the first call's first K entries are its start; every
    later call (one per update) re-seeds the empty clusters, asserted to be none."""

    def __init__(self, kmeans_code):
        self.kmeans_code, self.randperm, self.starts = kmeans_code, torch.randperm, []

    def __call__(self, n, *args, **kwargs):
        drawn = self.randperm(n, *args, **kwargs)
        frame = sys._getframe(1)
        if frame.f_code is self.kmeans_code:
            if "iter" not in frame.f_locals:  # before the loop: the start
                self.starts.append(drawn[: frame.f_locals["K"]].tolist())
            else:
                assert int(frame.f_locals["ndead"]) == 0, "an empty cluster was re-seeded"
        return drawn


def stop(losses: list[float], rule) -> int:
    """The pass (1-based) at which a rule on (L_prev, L) stops."""
    return next(t for t in range(1, len(losses)) if rule(losses[t - 1], losses[t])) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="checkout or bare mirror of HERECJ/FastVae_Gpu")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    stub_modules()
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(args.repo, Path(scratch), "sampler_gpu_mm.py")
        sys.path.insert(0, str(root))
        import sampler_gpu_mm

        points = make_points()
        draws = Draws(sampler_gpu_mm.kmeans.__code__)
        torch.randperm = draws
        try:
            printed = io.StringIO()
            torch.manual_seed(SEED)
            with contextlib.redirect_stdout(printed):
                centroids, assignments, _, _ = sampler_gpu_mm.kmeans(points, K, verbose=True)
            passes = printed.getvalue().count("step:")
            (start,) = draws.starts
            # the official passes without a stopping rule: (centroids, assignments, loss) of passes 1, 2, ...
            lloyd, current = [], points[start]
            while len(lloyd) < max(passes, 2) or lloyd[-2][2] - lloyd[-1][2] >= TOLERANCE:  # both rules decided
                updated, labels, _, loss = sampler_gpu_mm.kmeans(points, current.clone(), max_iter=1)
                lloyd.append((current, labels, loss))
                current = updated
        finally:
            torch.randperm = draws.randperm
    losses = [loss for _, _, loss in lloyd]
    relative = stop(losses, lambda previous, loss: previous - loss < previous * TOLERANCE)
    absolute = stop(losses, lambda previous, loss: previous - loss < TOLERANCE)
    assert relative == passes < 300, (relative, passes)
    assert torch.equal(lloyd[relative - 1][0], centroids) and torch.equal(lloyd[relative - 1][1], assignments)
    other_centroids, other_assignments, _ = lloyd[absolute - 1]
    assert absolute != relative, "the absolute rule stops at the same pass"
    assert not torch.equal(other_assignments, assignments), "the absolute rule ends with the same assignments"
    assert not torch.allclose(other_centroids, centroids, rtol=1e-6, atol=1e-9), "... with the same centroids"
    document = {
        "repository": "HERECJ/FastVae_Gpu",
        "commit": commit,
        "command": shlex.join(["python3", "bench/official/fastvae_kmeans.py", *sys.argv[1:]]),
        "function": "sampler_gpu_mm.py:kmeans",
        "seed": SEED,
        "points": points.tolist(),
        "n_clusters": K,
        "start": start,
        "centroids": centroids.tolist(),
        "assignments": assignments.tolist(),
        "passes": passes,
        "losses": losses[: max(relative, absolute)],
        "absolute_rule": {
            "tolerance": TOLERANCE,
            "passes": absolute,
            "assignments_differing": int((other_assignments != assignments).sum()),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes): the official rule stops at pass {passes}, "
        f"an absolute {TOLERANCE:g} at pass {absolute} with {document['absolute_rule']['assignments_differing']} "
        "other assignments"
    )


if __name__ == "__main__":
    main()
