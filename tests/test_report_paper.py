"""The paper beside recx in every table (issue 43, section 3): an experiment's `paper:` figures next to recx's, the
budget each row ran, and the marks that keep a capped or reduced run from reading as a reproduction."""

from __future__ import annotations

import pandas as pd
import pytest

import recx
from recx import RecxError
from recx.sweeps.experiments import experiment_spec, load_experiments

EXPERIMENT = """
experiments:
  paper-check:
    datasets: [tiny]
    seeds: [0]
    ks: [10, 20]
    defaults: {dim: 8, device: cpu, batch_size: 256, n_negatives: 20, valid_metric: ndcg@20}
    methods:
      capped: {loss: bpr, epochs: 2, patience: 5}
      fixed: {loss: bpr, epochs: 2, patience: 5, lr: 0.01}
      tuned: {loss: bce, epochs: 2, patience: 1, grid: {lr: [0.01, 0.001]}}
    paper:
      source: "A paper, Table 1"
      tolerance: 0.05
      epochs: 10
      values:
        tiny:
          capped: {ndcg@20: 0.1, recall@10: {value: 0.2, source: "Table 2"}}
          tuned: {ndcg@20: 0.05}
"""


@pytest.fixture
def experiments(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENT)
    return path


def test_the_report_puts_the_papers_figures_beside_recxs_and_marks_what_did_not_run_to_the_end(
    experiments, tiny_root, tmp_path
):
    out = tmp_path / "out"
    recx.sweep(experiments, "paper-check", out=out, data_root=tiny_root, settings={"lr": 0.01}, methods=["tuned"])
    recx.sweep(experiments, "paper-check", out=out, data_root=tiny_root, methods=["capped"])
    recx.sweep(experiments, "paper-check", out=out, data_root=tiny_root, methods=["fixed"], seeds=[0, 1])
    results = pd.read_parquet(out / "results.parquet")
    figures = pd.read_csv(out / "paper.csv")
    assert list(figures.figure) == ["NDCG@20", "Recall@10", "NDCG@20"] and list(figures.source)[1] == "Table 2"
    overall = results[(results.split == "test") & (results.stratum == "all")]
    capped_ndcg = float(
        overall[(overall.method == "capped") & (overall.metric == "ndcg") & (overall.k == 20)].value.iloc[0]
    )
    assert figures.recx[0] == pytest.approx(capped_ndcg)
    assert figures.delta[0] == pytest.approx((capped_ndcg - 0.1) / 0.1)
    assert list(figures.within) == [abs(d) <= 0.05 for d in figures.delta]

    budget = pd.read_csv(out / "budget.csv").set_index("method")
    assert (
        budget.loc["capped", "stopped by"] == "epoch cap, below the paper's 10" and budget.loc["capped", "mark"] == "‡"
    )
    assert budget.loc["tuned", "grid points"] == "1 of 2" and "§" in budget.loc["tuned", "mark"]
    assert budget.loc["capped", "seeds"] == "1 of 1" and budget.loc["capped", "device"] == "cpu"
    assert budget.loc["fixed", "seeds"] == "2 (1 planned)" and "§" not in budget.loc["fixed", "mark"]

    table = (out / "table.md").read_text()
    assert "| tiny | capped ‡ |" in table and "| tiny | tuned " in table and "§" in table
    report = (out / "report.md").read_text()
    assert "## The paper beside recx" in report and "A paper, Table 1" in report
    assert "stopped at its epoch cap" in report and "## What each row ran" in report


@pytest.mark.parametrize(
    "block, message",
    [
        ("paper: [1]", "experiments.paper-check.paper: expected a mapping"),
        ("paper: {source: x, values: {tiny: {capped: {ndcg@30: 0.1}}}}", "K among the experiment's ks (10, 20)"),
        ("paper: {source: x, values: {tiny: {capped: {ndgc@20: 0.1}}}}", "expected METRIC@K with a cut-off metric"),
        ("paper: {source: x, values: {other: {capped: {ndcg@20: 0.1}}}}", "'other' is not a dataset"),
        ("paper: {source: x, values: {tiny: {nope: {ndcg@20: 0.1}}}}", "'nope' is not a method"),
        ("paper: {source: x, tolerance: 5, values: {tiny: {capped: {ndcg@20: 0.1}}}}", "tolerance: a relative"),
        ("paper: {source: x, values: {tiny: {capped: {ndcg@20: high}}}}", "expected a number"),
        ("paper: {values: {tiny: {capped: {ndcg@20: 0.1}}}}", "paper.source: the paper and table"),
        ("paper: {source: x, pages: 3, values: {}}", "unknown key 'pages'"),
        ("paper: {source: x, values: {}}", "or none, with the paper's epochs alone"),
    ],
)
def test_a_malformed_paper_block_is_one_message_naming_its_key(tmp_path, block, message):
    path = tmp_path / "e.yaml"
    head = EXPERIMENT.split("    paper:")[0]
    path.write_text(head + "    " + block + "\n")
    with pytest.raises(RecxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        experiment_spec(load_experiments(path), "paper-check", path)


@pytest.mark.parametrize(
    "epochs, cap, patience, validated, paper_epochs, stopped, capped",
    [
        (3, 10, 2, True, None, "early stopping (patience 2)", False),
        (10, 10, 2, True, None, "epoch cap", True),
        (10, 10, 10, True, None, "fixed budget", False),
        (10, 10, 2, False, None, "fixed budget", False),
        (10, 10, 2, True, 200, "epoch cap, below the paper's 200", True),
        (200, 200, 300, False, 200, "fixed budget", False),
        (0, 1, 5, False, None, "nothing to train", False),
        (4, 4, 10, False, 200, "fixed budget", False),  # WRMF: 4 iterations, tuned, not the paper's epochs
    ],
)
def test_why_a_run_stopped(tmp_path, epochs, cap, patience, validated, paper_epochs, stopped, capped):
    import json

    from recx.reports.budget import run_budget

    records = [{"epoch": e + 1, "seconds": 0.5, **({"valid_ndcg@20": 0.1} if validated else {})} for e in range(epochs)]
    (tmp_path / "epochs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    model = "wrmf" if (epochs, cap) == (4, 4) else "mf"
    (tmp_path / "config.yaml").write_text(f"model: {model}\nepochs: {cap}\npatience: {patience}\n")
    (tmp_path / "environment.json").write_text('{"device": "cuda"}')
    found = run_budget(tmp_path, paper_epochs)
    assert (found.stopped, found.capped, found.epochs, found.device) == (stopped, capped, epochs, "cuda")
    assert found.seconds == pytest.approx(0.5 * epochs)


def test_a_paper_block_may_state_only_the_papers_epochs(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(
        EXPERIMENT.split("    paper:")[0] + '    paper: {source: "slides, Figure 8 (a plot)", epochs: 200}\n'
    )
    from recx.sweeps.experiments import paper_figures

    spec = experiment_spec(load_experiments(path), "paper-check", path)
    assert (
        paper_figures(spec, "paper-check", path)["values"] == []
        and paper_figures(spec, "paper-check", path)["epochs"] == 200
    )
