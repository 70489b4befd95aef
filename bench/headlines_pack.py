"""`make headlines-pack`: what `make reproduce-headlines-gpu` needs on a lent GPU machine, in one ignored folder that
travels with the checkout (`.headlines-pack/`, carried by name): the source files of the five headline experiments'
datasets (bench/headline_data.py). Nothing to install: the lent machine has what recx needs.

    python3 bench/headlines_pack.py [--source ../shared/data] [--out .headlines-pack]
    python3 bench/headlines_pack.py --synthetic --out build/headlines-pack   # tiny .mat files (CI's dry run)

Layout: `data/fastvae-mat/gowalladata.mat` and `data/fastvae-mat/ml10Mdata.mat` (6.0 MiB with the real data; the
device tool carries at most 64 MiB with the checkout), `manifest.json` each file's size and sha256.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from gpu_pack import write_pack
from headline_data import ROOT, SHARED_DATA, packed_path, recipes, synthetic_mat

LIMIT_MIB = 48


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SHARED_DATA, help="the shared data folder (../shared/data)")
    parser.add_argument("--synthetic", action="store_true", help="tiny synthetic .mat files instead of --source")
    parser.add_argument("--out", type=Path, default=ROOT / ".headlines-pack")
    options = parser.parse_args()
    files = sorted({packed_path(recipe) for recipe in recipes().values()})

    def fill(staging: Path) -> None:
        for seed, name in enumerate(files):
            target = staging / "data" / name
            if options.synthetic and not name.endswith(".mat"):
                sys.exit(f"headlines-pack: --synthetic writes .mat files only, and {name} is not one")
            if options.synthetic:
                synthetic_mat(target, seed=seed)
                continue
            if not (options.source / name).is_file():
                sys.exit(f"headlines-pack: {options.source} lacks {name} (the shared data folder, or use --synthetic)")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(options.source / name, target)

    out = options.out.resolve()
    source = "synthetic" if options.synthetic else str(options.source.resolve())
    count, mib = write_pack(out, fill, source, LIMIT_MIB, "headlines-pack")
    print(f"headlines-pack: {out} ({count} files, {mib:.1f} MiB: {', '.join(files)})")


if __name__ == "__main__":
    main()
