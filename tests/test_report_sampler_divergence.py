"""Sampler diagnostics: KL / TV against the softmax (exact MIDX ~ 0), and `recx diagnose sampler` on a tiny run."""

from __future__ import annotations

import pandas as pd
import torch
from sampler_helpers import random_dataset

from recx.reports.sampler_divergence import ModelView, divergence_table, divergences


def test_divergences_match_their_definitions():
    log_p = torch.log(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64))
    log_q = torch.log(torch.tensor([[0.25, 0.75, 0.0]], dtype=torch.float64))
    kl, tv = divergences(log_q, log_p)
    assert torch.allclose(
        kl,
        torch.tensor([0.25 * torch.log(torch.tensor(0.5)) + 0.75 * torch.log(torch.tensor(3.0))], dtype=torch.float64),
    )
    assert torch.allclose(tv, torch.tensor([0.5], dtype=torch.float64))


def test_exact_midx_has_zero_kl_and_the_others_do_not():
    dataset = random_dataset(30, 80, seed=0)
    generator = torch.Generator().manual_seed(0)
    users = torch.arange(6)
    view = ModelView(
        "trained",
        2 * torch.randn(6, 8, generator=generator, dtype=torch.float64),
        torch.randn(80, 8, generator=generator, dtype=torch.float64),
    )
    table = divergence_table([view], dataset, users, ["midx", "midx_uni", "uniform", "dns"], 4, 20_000, 0)
    by_sampler = table.groupby("sampler").kl.max()
    assert by_sampler["midx"] < 1e-10
    assert by_sampler["midx_uni"] > 1e-3 and by_sampler["uniform"] > 1e-3
    assert not table[table.sampler == "dns"].exact.any() and table[table.sampler == "midx"].exact.all()


def test_diagnose_command_writes_the_table_and_figure(recx_cli, tiny_root, tmp_path):
    run = tmp_path / "run"
    trained = recx_cli(
        "train",
        "--dataset",
        "tiny",
        "--data-root",
        tiny_root,
        "--model",
        "fastvae",
        "--loss",
        "softmax",
        "--sampler",
        "midx_pop",
        "--n-negatives",
        "10",
        "--epochs",
        "1",
        "--dim",
        "4",
        "--batch-size",
        "64",
        "--device",
        "cpu",
        "--set",
        "model_args.hidden=8",
        "--run-dir",
        run,
        "--quiet",
    )
    assert trained.code == 0, trained.err
    figure = tmp_path / "fig2.png"
    result = recx_cli(
        "diagnose",
        "sampler",
        run,
        "--users",
        "3",
        "--draws",
        "2000",
        "--n-codewords",
        "4",
        "--plot",
        figure,
        "--device",
        "cpu",
    )
    assert result.code == 0, result.err
    table = pd.read_csv(run / "sampler_diagnostics.csv")
    assert set(table.model) == {"random init", "trained"} and len(table) == 2 * 7 * 3
    assert table[table.sampler == "midx"].kl.abs().max() < 1e-5
    assert figure.stat().st_size > 10_000
    unknown = recx_cli("diagnose", "sampler", run, "--sampler", "nope")
    assert unknown.code == 1 and "unknown sampler 'nope'" in unknown.err
