"""A report row is one configuration (issue 43, section 3): runs of different configurations are never averaged
under one label, whatever their runner; runs that differ by their seed only are."""

from __future__ import annotations

import pandas as pd

import recx
from recx.runs.collection import load_results

FAST = {"dim": 8, "epochs": 2, "batch_size": 256, "n_negatives": 20, "device": "cpu"}
RUNS = {  # folder: configuration (every runner: interactions, graph, users, alternating, none)
    "bpr-0": {"model": "mf", "loss": "bpr", "seed": 0},
    "bpr-1": {"model": "mf", "loss": "bpr", "seed": 1},
    "bpr-lr": {"model": "mf", "loss": "bpr", "seed": 0, "lr": 0.01},
    "lightgcn": {"model": "lightgcn", "loss": "bpr", "seed": 0},
    "multvae": {"model": "multvae", "loss": "full_softmax", "sampler": "full", "optimizer": "adam", "seed": 0},
    "wrmf": {"model": "wrmf", "seed": 0},
    "mostpop": {"model": "popularity", "seed": 0},
}


def test_each_configuration_is_its_own_row_and_seeds_are_pooled(tiny_root, tmp_path):
    files = []
    for folder, config in RUNS.items():
        options = {**FAST, **config}
        if config["model"] in ("wrmf", "popularity"):  # no loss, no sampler, no batches
            options = {key: value for key, value in options.items() if key not in ("batch_size", "n_negatives")}
        run = recx.train({"dataset": "tiny", **options}, data_root=tiny_root, run_dir=tmp_path / folder)
        files.append(run.path / "results.parquet")
    results, _ = load_results(files)
    label = results.drop_duplicates("run_id").set_index("run_id").method
    by_folder = {folder: label[pd.read_parquet(file).run_id.iloc[0]] for folder, file in zip(RUNS, files, strict=True)}
    assert by_folder["bpr-0"] == by_folder["bpr-1"] == "mf bpr+uniform lr=0.005"
    assert by_folder["bpr-lr"] == "mf bpr+uniform lr=0.01"
    assert by_folder["lightgcn"] == "lightgcn bpr+uniform"
    assert by_folder["multvae"] == "multvae full_softmax+full"
    assert by_folder["wrmf"] == "wrmf" and by_folder["mostpop"] == "mostpop"
    assert len(set(by_folder.values())) == len(RUNS) - 1  # only the two seeds share a row

    own = pd.concat(pd.read_parquet(file) for file in files[-2:])
    assert own.loss.isna().all() and own.sampler.isna().all()  # WRMF and MostPop record no loss and no sampler

    written = recx.report(files, tmp_path / "report", baseline="wrmf")
    table = (tmp_path / "report" / "table.md").read_text()
    for name in set(by_folder.values()):
        assert f"| {name} |" in table, name
    assert "softmax+uniform" not in table and "against wrmf" in written.read_text()
