"""Golden training loop of implicit's ALS with its default constructor (issue 43) -> tests/golden/official/wrmf_loop.json.

    python3 bench/official/wrmf_loop.py [--out tests/golden/official/wrmf_loop.json]

Runs benfred/implicit 0.7.3 (the installed package, the `test` extra's pin: its implicit/cpu/als.py is the file at
tag v0.7.3) as a user would: `implicit.cpu.als.AlternatingLeastSquares()` with no argument, then `fit` on a tiny
binary user x item matrix (one user and one item without interactions). The constructor's defaults are read from the
model it built (factors, regularization, alpha, dtype, use_cg, cg_steps, iterations, ...) and stored; `fit` runs its
15 iterations of a user half-step then an item half-step (3 conjugate-gradient steps per row, confidence alpha x r).

Two runs, nothing official replaced; what is random or computed inside is recorded as it happens:
- `default`: `fit` exactly as constructed (float32). Its `check_random_state(None)` generator (fresh entropy) is
  wrapped where implicit/cpu/als.py calls it: each `random(shape, dtype)` draw is recorded (the user factors'
  draws, then the items'; `fit` multiplies them by 0.01).
- `float64`: a second default-constructed model whose factors are set before `fit` to the first run's draws
  times 0.01, computed in float64: `fit` then keeps them (it draws only missing factors) and its solver runs in
  float64, the factors' dtype; nothing else differs from the default run.
In both, the solver implicit/cpu/als.py calls (`_als.least_squares_cg`, reached through the module's `_als`) is
wrapped to record, after each half-step, implicit's own training loss (`_als.calculate_loss`, the loss
`calculate_training_loss=True` would log) of the factors it left, and the factors the first half-step starts from;
the factors are copied after iterations 1, 2, 3 and 15 of the float64 run and 1 and 15 of the default one (fit's
`callback` argument, which is not a constructor setting). float32 values are stored with the 9 significant digits
that give them back exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import sys
import types
from pathlib import Path

import numpy as np
import scipy.sparse
import threadpoolctl

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "official" / "wrmf_loop.json"
N_USERS, N_ITEMS = 6, 5
# user 5 and item 4 have no interaction
INTERACTIONS = [[0, 2, 3], [1, 2], [0, 1, 3], [3], [1, 2], []]
SNAPSHOTS = {"float32": (1, 15), "float64": (1, 2, 3, 15)}  # the float32 run's figures, a tolerance apart, are fewer
DEFAULTS = ("factors", "regularization", "alpha", "use_native", "use_cg", "cg_steps", "iterations")
DEFAULTS += ("calculate_training_loss", "random_state")


def figures(array: np.ndarray) -> list:
    """The array as nested lists; float32 values written with the 9 significant digits that give them back exactly
    (as float32), so that the float32 run takes half the space of the float64 one."""
    if array.dtype == np.float32:
        return [[float(f"{value:.9g}") for value in row] for row in array.tolist()]
    return array.tolist()


def compact(text: str) -> str:
    """Indented JSON with each list of numbers on one line (a factor row of 100 numbers is one line)."""
    return re.sub(r"\[\s+([-+.\deE]+(?:,\s+[-+.\deE]+)*)\s+\]", lambda m: "[" + re.sub(r",\s+", ", ", m[1]) + "]", text)


def matrix() -> scipy.sparse.csr_matrix:
    rows = [user for user, items in enumerate(INTERACTIONS) for _ in items]
    columns = [item for items in INTERACTIONS for item in items]
    return scipy.sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, columns)), shape=(N_USERS, N_ITEMS))


class RecordedGenerator:
    """A numpy Generator whose `random` draws are recorded."""

    def __init__(self, generator, draws: list):
        self.generator, self.draws = generator, draws

    def random(self, *args, **kwargs):
        drawn = self.generator.random(*args, **kwargs)
        self.draws.append(drawn.copy())
        return drawn

    def __getattr__(self, name):
        return getattr(self.generator, name)


@contextlib.contextmanager
def recording(official, draws: list, losses: list, initial: dict):
    """implicit/cpu/als.py's `check_random_state` and `_als` replaced by recording wrappers while it runs."""
    real_check, real_als = official.check_random_state, official._als
    state: dict = {}

    def check_random_state(random_state):
        return RecordedGenerator(real_check(random_state), draws)

    def least_squares_cg(Cui, X, Y, regularization, **kwargs):
        if "user_items" not in state:
            initial.update(user_factors=figures(X), item_factors=figures(Y))
        result = real_als.least_squares_cg(Cui, X, Y, regularization, **kwargs)
        if "user_items" not in state:  # the first call is the users' half-step: Cui is users x items
            state["user_items"], state["factors"] = Cui, (X, Y)
        users, items = state["factors"]
        losses.append(float(real_als.calculate_loss(state["user_items"], users, items, regularization, num_threads=1)))
        return result

    als = types.SimpleNamespace(**{name: getattr(real_als, name) for name in dir(real_als) if not name.startswith("_")})
    als.least_squares_cg = least_squares_cg
    official.check_random_state, official._als = check_random_state, als
    try:
        yield
    finally:
        official.check_random_state, official._als = real_check, real_als


def run(official, factors: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """A default-constructed model's fit (from `factors` when given); what it drew and the figures it left."""
    model = official.AlternatingLeastSquares()
    if factors is not None:
        model.user_factors, model.item_factors = (table.copy() for table in factors)
    draws: list = []
    losses: list = []
    snapshots: list = []
    initial: dict = {}

    def callback(iteration, elapsed, loss):
        if iteration + 1 in SNAPSHOTS[str(model.user_factors.dtype)]:
            snapshots.append(
                {
                    "iteration": iteration + 1,
                    "user_factors": figures(model.user_factors),
                    "item_factors": figures(model.item_factors),
                }
            )

    with recording(official, draws, losses, initial), threadpoolctl.threadpool_limits(1, "blas"):
        model.fit(matrix(), show_progress=False, callback=callback)
    return {
        "defaults": {name: getattr(model, name) for name in DEFAULTS} | {"dtype": str(np.dtype(model.dtype))},
        "factors_dtype": str(model.user_factors.dtype),
        "draws": [figures(draw) for draw in draws],
        "initial": initial,
        "half_step_losses": losses,
        "snapshots": snapshots,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import implicit
    import implicit.cpu.als as official

    assert implicit.__version__ == "0.7.3", implicit.__version__
    default = run(official, None)
    user_draws, item_draws = (np.array(draw, dtype=np.float64) for draw in default["draws"])
    float64 = run(official, (user_draws * 0.01, item_draws * 0.01))
    assert not float64["draws"] and float64["factors_dtype"] == "float64"
    del float64["initial"]  # the draws times 0.01 in float64, by construction
    document = {
        "repository": "benfred/implicit",
        "version": implicit.__version__,
        "commit": "8a95dbe24ca675a6edd86aafb3b4cd5ae7287edf",  # tag v0.7.3; implicit/cpu/als.py there is the installed one
        "command": shlex.join(["python3", "bench/official/wrmf_loop.py", *sys.argv[1:]]),
        "function": "implicit/cpu/als.py:AlternatingLeastSquares() (no argument) and its fit; "
        "implicit/cpu/_als.pyx:least_squares_cg (the solver fit calls), calculate_loss (recorded after each half-step)",
        "inputs": {
            "n_users": N_USERS,
            "n_items": N_ITEMS,
            "interactions": INTERACTIONS,
            "snapshots": {name: list(its) for name, its in SNAPSHOTS.items()},
        },
        "default": default,
        "float64": float64,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(compact(json.dumps(document, indent=1)) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
