"""`make gpu-pack`: what `make gpu-check` needs on a lent GPU machine, in one ignored folder that travels with the
checkout (`.gpu-pack/`, carried by name): the data it reads and the CPU side of its real runs.

    python3 bench/gpu_pack.py [--source ../shared/data] [--out .gpu-pack] [--no-cpu-runs]
    python3 bench/gpu_pack.py --synthetic --out build/gpu-pack   # tiny data of the same formats (CI's dry run)

Layout: `data/gowalla/{train,valid,test}.txt` (LightGCN split) and `data/fastvae-mat/gowalladata.mat`, copied from
`--source`; `cpu-runs/<run>/` the files of each run of bench/gpu_runs.py trained here on the CPU (config.yaml,
epochs.jsonl, results.parquet, environment.json); `manifest.json` each file's size and sha256. About 12 MiB with the
real data (the device tool carries at most 64 MiB with the checkout). The CPU runs take about 5 minutes on 2 cores.
A folder that is not a pack (no manifest.json) is never written into.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
from gpu_runs import RUN_FILES, RUNS, prepare_command, train_command

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FILES = ("gowalla/train.txt", "gowalla/valid.txt", "gowalla/test.txt", "fastvae-mat/gowalladata.mat")
LIMIT_MIB = 48


def synthetic_source(folder: Path, n_users: int = 300, n_items: int = 200, seed: int = 0) -> None:
    """Tiny data in the source formats: LightGCN adjacency lines (user item item ...) and a users x items .mat."""
    import scipy.io
    import scipy.sparse

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_items + 1) ** 0.8
    rows = [
        np.sort(rng.choice(n_items, size=int(rng.integers(12, 30)), replace=False, p=weights / weights.sum()))
        for _ in range(n_users)
    ]
    (folder / "gowalla").mkdir(parents=True)
    cuts = {"train": (0.0, 0.7), "valid": (0.7, 0.8), "test": (0.8, 1.0)}
    for split, (low, high) in cuts.items():
        lines = []
        for user, items in enumerate(rows):
            part = items[int(low * len(items)) : int(high * len(items))]
            lines.append(" ".join(map(str, [user, *part.tolist()])))
        (folder / "gowalla" / f"{split}.txt").write_text("\n".join(lines) + "\n")
    users = np.repeat(np.arange(n_users), [len(items) for items in rows])
    matrix = scipy.sparse.csr_matrix((np.ones(users.size), (users, np.concatenate(rows))), shape=(n_users, n_items))
    (folder / "fastvae-mat").mkdir()
    scipy.io.savemat(folder / "fastvae-mat" / "gowalladata.mat", {"data": matrix})


def copy_source(source: Path, data: Path) -> None:
    missing = [name for name in SOURCE_FILES if not (source / name).is_file()]
    if missing:
        sys.exit(f"gpu-pack: {source} lacks {', '.join(missing)} (the shared data folder, or use --synthetic)")
    for name in SOURCE_FILES:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, data / name)


def cpu_runs(data: Path, runs_folder: Path, epochs_of) -> None:
    """Train each packed run on the CPU here and keep its files."""
    with tempfile.TemporaryDirectory(prefix="recx-gpu-pack-") as scratch:
        root = Path(scratch) / "data"
        for run in RUNS:
            started = time.perf_counter()
            folder = Path(scratch) / "runs" / run.name
            for command in (
                prepare_command(sys.executable, run, data, root),
                train_command(sys.executable, run, root, folder, "cpu", epochs_of(run)),
            ):
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"gpu-pack: `{' '.join(command[1:])}` failed:\n{done.stdout}{done.stderr}")
            (runs_folder / run.name).mkdir(parents=True)
            for name in RUN_FILES:
                shutil.copyfile(folder / name, runs_folder / run.name / name)
            print(f"cpu run {run.name}: {epochs_of(run)} epoch(s), {time.perf_counter() - started:.0f} s", flush=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_pack(out: Path, fill: Callable[[Path], None], source: str, limit_mib: float, name: str) -> tuple[int, float]:
    """Fill a staging folder beside `out` (`fill(staging)`), write its manifest.json (each file's size and sha256) and
    swap it in for `out`: (files, MiB). A folder that is not a pack (no manifest.json) is never written into; `name`
    starts each error."""
    if out.exists() and not (out / "manifest.json").is_file():
        sys.exit(f"{name}: {out} exists and is not a pack (no manifest.json); choose another --out")
    staging = out.with_name(out.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)  # an interrupted pack of ours
    staging.mkdir(parents=True)
    fill(staging)
    files = sorted(path for path in staging.rglob("*") if path.is_file())
    total = sum(path.stat().st_size for path in files)
    if total > limit_mib * 2**20:
        sys.exit(f"{name}: {total / 2**20:.1f} MiB is over the {limit_mib} MiB the pack may take")
    manifest = {
        "made": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "source": source,
        "files": {str(p.relative_to(staging)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files},
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if out.exists():
        shutil.rmtree(out)  # a previous pack (it has our manifest)
    staging.rename(out)
    return len(files) + 1, total / 2**20


def check_pack(pack: Path, remedy: str) -> tuple[bool, str]:
    """(ok, one line): every file of the pack's manifest there with its sha256; `remedy` names the make target."""
    manifest = pack / "manifest.json"
    if not manifest.is_file():
        return False, f"{pack} holds no pack ({remedy})"
    files = json.loads(manifest.read_text())["files"]
    bad = [
        name
        for name, card in files.items()
        if not (pack / name).is_file() or hashlib.sha256((pack / name).read_bytes()).hexdigest() != card["sha256"]
    ]
    if bad:
        return False, f"pack files missing or changed: {', '.join(bad)}"
    return (
        True,
        f"pack {pack.name}: {len(files)} files, {sum(c['bytes'] for c in files.values()) / 2**20:.1f} MiB, checksums equal",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--synthetic", action="store_true", help="tiny synthetic data instead of --source")
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-pack")
    parser.add_argument("--no-cpu-runs", action="store_true", help="data only (the check then runs no CPU side)")
    options = parser.parse_args()

    def fill(staging: Path) -> None:
        data = staging / "data"
        data.mkdir()
        if options.synthetic:
            synthetic_source(data)
        else:
            copy_source(options.source, data)
        if not options.no_cpu_runs:
            cpu_runs(data, staging / "cpu-runs", lambda run: run.dry_epochs if options.synthetic else run.cpu_epochs)

    out = options.out.resolve()
    source = "synthetic" if options.synthetic else str(options.source.resolve())
    files, mib = write_pack(out, fill, source, LIMIT_MIB, "gpu-pack")
    print(f"gpu-pack: {out} ({files} files, {mib:.1f} MiB)")


if __name__ == "__main__":
    main()
