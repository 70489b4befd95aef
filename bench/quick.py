"""The benches' `--quick` mode, which `make ci-bench-quick` runs in CI: each bench on tiny synthetic data, in
seconds, so that a bench nothing else runs cannot rot unseen (bench/prepare_speed.py had stopped running when the
function it timed was renamed). A quick run goes through the bench's own code as a full run does and prints its
figures and its ratios to the baseline; at that size they mean nothing, and nothing checks them (no target is
asserted, no timing compared).

    quick.option(parser, steps=1, ...)  # --quick, and the bench's own defaults it replaces (given options still win)
    quick.source()                      # a LightGCN-format folder (train/valid/test.txt), for a bench's --source
    quick.data_root("gowalla")          # a data root with recx's synthetic dataset prepared under each name given
"""

from __future__ import annotations

import argparse
import atexit
import functools
import shutil
import sys
import tempfile
from pathlib import Path

HELP = "tiny synthetic data, in seconds (make ci-bench-quick): the bench runs through; its figures mean nothing"


def option(parser: argparse.ArgumentParser, **defaults) -> None:
    """Add `--quick` to `parser`; when it is given, `defaults` replace the defaults of the bench's options (those
    given on the command line still win). A default that needs files (quick.source(), quick.data_root()) is passed
    as a callable, made only when --quick is given."""
    parser.add_argument("--quick", action="store_true", help=HELP)
    if "--quick" in sys.argv[1:]:
        parser.set_defaults(**{key: value() if callable(value) else value for key, value in defaults.items()})


@functools.cache
def scratch() -> Path:
    """A temporary folder for this process's quick data, removed at exit."""
    folder = tempfile.mkdtemp(prefix="recx-bench-quick-")
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


@functools.cache
def source(n_users: int = 300, n_items: int = 200) -> Path:
    """Gowalla's LightGCN split in its format (train/valid/test.txt adjacency lines), tiny: bench/gpu_pack.py's
    synthetic source, which `make gpu-check-cpu` also uses."""
    from gpu_pack import synthetic_source

    folder = scratch() / f"source-{n_users}x{n_items}"
    synthetic_source(folder, n_users, n_items)
    return folder / "gowalla"


def data_root(*names: str, n_users: int = 400, n_items: int = 300, mean_length: int = 25) -> Path:
    """A data root holding recx's synthetic dataset (80/10/10 per user) prepared under each of `names`."""
    from recx.data.prepare import PrepareOptions, prepare

    root = scratch() / "data"
    synthetic = {"n_users": n_users, "n_items": n_items, "mean_length": mean_length}
    for name in names:
        if not (root / name).is_dir():
            prepare(name, PrepareOptions(format="synthetic", ratios="80/10/10", synthetic=synthetic), root)
    return root
