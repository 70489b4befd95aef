"""Per-epoch validation curves of a sweep's runs as one PNG (the FastVAE paper's Figure 3).

Reads `<sweep out>/runs/*/epochs.jsonl` and `config.yaml`, labels each run by model and sampler, and plots the
recorded validation metric (`valid_<metric>`) against the epoch.
Run: python -m recx.eval.epoch_curves results/fastvae-samplers [--out figure3.png]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from recx.errors import RecxError


def read_curves(sweep_out: Path) -> dict[str, list[tuple[int, float]]]:
    """{label: [(epoch, value)]} for every run folder that recorded a validation metric."""
    curves = {}
    for folder in sorted((sweep_out / "runs").glob("*/")):
        epochs_file, config_file = folder / "epochs.jsonl", folder / "config.yaml"
        if not epochs_file.is_file() or not config_file.is_file():
            continue
        config = yaml.safe_load(config_file.read_text())
        key = f"valid_{config['valid_metric']}"
        records = [json.loads(line) for line in epochs_file.read_text().splitlines() if line.strip()]
        points = [(record["epoch"], record[key]) for record in records if key in record]
        if points:
            label = config["model"] if config["model"] == "multvae" else f"{config['model']}+{config['sampler']}"
            curves[f"{label} (seed {config['seed']})"] = points
    if not curves:
        raise RecxError(f"{sweep_out}/runs: no run recorded a validation metric per epoch")
    return curves


def plot_curves(curves: dict[str, list[tuple[int, float]]], metric: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 4.5))
    for label, points in curves.items():
        axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=label)
    axis.set(xlabel="epoch", ylabel=metric)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_out", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    curves = read_curves(args.sweep_out)
    out = args.out or args.sweep_out / "epoch_curves.png"
    plot_curves(curves, "validation metric", out)
    for label, points in curves.items():
        print(f"{label}: " + ", ".join(f"{epoch}:{value:.4f}" for epoch, value in points))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
