"""The Python front door checks its arguments as the command line does (issue 46, item 2): every public function of
recx.api called with a wrong type, an empty value or one out of range raises one RecxError naming the argument, where
`recx.train(42)` ended in a TypeError seven frames deep, `recx.evaluate(run, 'test', [0])` in an IndexError of the
evaluator and `recx.train(..., ks=[0])` wrote rows of k = 0 that the command line refuses. One implementation
(recx.core.call_arguments): from the command line the same check names the option instead (`--batch-size`)."""

from __future__ import annotations

import pytest

import recx
from recx import RecxError
from tests.safety_helpers import assert_user_error, snapshot

FAST = {"dim": 8, "epochs": 1, "batch_size": 256, "n_negatives": 5, "device": "cpu"}


@pytest.fixture
def run(tiny_root, tmp_path):
    return recx.train({"dataset": "tiny", "loss": "bpr"}, data_root=tiny_root, run_dir=tmp_path / "run", **FAST)


def refused(call, *expected: str) -> str:
    with pytest.raises(RecxError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message
    for text in expected:
        assert text in message, (text, message)
    return message


def test_train_and_run_config_name_the_argument_at_fault(tiny_root, tmp_path):
    refused(lambda: recx.train(42), "config 42: expected a mapping of config keys, a RunConfig or the path of a YAML")
    refused(lambda: recx.run_config([1]), "config [1]: expected a mapping")
    refused(lambda: recx.run_config("", {}), "config '': expected a path")
    refused(lambda: recx.run_config({}, [("lr", 1)]), "settings [('lr', 1)]: expected a mapping")
    refused(lambda: recx.run_config({1: 2}), "config {1: 2}: expected a mapping of config keys (a dict with str keys)")
    base = {"dataset": "tiny", "loss": "bpr", **FAST}
    train = lambda **extra: recx.train(base, data_root=tiny_root, run_dir=tmp_path / "r", **extra)  # noqa: E731
    before = snapshot(tmp_path)
    refused(lambda: train(ks=[0]), "ks [0]: cut-offs must be positive integers")
    refused(lambda: train(ks=[]), "ks []: cut-offs must be positive integers")
    refused(lambda: train(ks=[10.5]), "ks [10.5]: expected a list of integers such as [10, 20, 50]")
    refused(lambda: train(ks="a,b"), "ks 'a,b': expected a comma-separated list of integers such as 10,20,50")
    refused(lambda: train(force="yes"), "force 'yes': expected True or False")
    refused(lambda: train(diagnostics=1), "diagnostics 1: expected True or False")
    refused(lambda: train(checkpoint_every=-1), "checkpoint_every -1: expected an integer >= 0 (0: never)")
    refused(lambda: train(progress="bar"), "progress 'bar': expected True, False or a rich Progress display")
    refused(lambda: train(track=""), "track '': expected a non-empty str")
    refused(lambda: recx.train(base, data_root=5), "data_root 5: expected a path")
    refused(lambda: recx.train(base, data_root=tiny_root, run_dir=""), "run_dir '': expected a path")
    refused(lambda: train(epochs="5"), "arguments: epochs = '5': expected an integer in [1, 100,000]")
    assert snapshot(tmp_path) == before  # nothing was written


def test_run_config_and_train_take_a_mapping_and_keywords_alike(tiny_root, tmp_path):
    assert recx.run_config(loss="bpr", epochs=5) == recx.run_config({"loss": "bpr", "epochs": 5})
    assert recx.run_config({"loss": "bpr"}, {"epochs": 4}, epochs=5).epochs == 5  # keywords over the mapping
    run = recx.train({"dataset": "tiny"}, data_root=tiny_root, run_dir=tmp_path / "r", loss="bpr", ks=10, **FAST)
    assert set(run.results.k) == {10, 20} and run.path == tmp_path / "r"  # ks as one int; valid_metric's k added


def test_evaluate_load_run_and_per_user_name_the_argument_at_fault(run, tmp_path):
    refused(lambda: recx.evaluate(run, "test", [0]), "ks [0]: cut-offs must be positive integers")
    refused(lambda: recx.evaluate(run, "test", [10], batch_size="big"), "batch_size 'big': expected an integer >= 1")
    refused(lambda: recx.evaluate(run, "test", [10], batch_size=0), "batch_size 0: expected an integer >= 1")
    refused(lambda: recx.evaluate(run, "tests", [10]), "split 'tests': expected valid or test")
    refused(lambda: recx.evaluate(run, "test", [10], device="gpu"), "device 'gpu': expected auto, cpu, cuda or cuda:N")
    refused(lambda: recx.evaluate(run, "test", [10], auc_beta=0), "auc_beta 0: expected a fraction in (0, 1]")
    refused(lambda: recx.evaluate(run, "test", [10], progress=None), "progress None: expected True or False")
    refused(lambda: recx.evaluate(7, "test", [10]), "run 7: expected a path")
    refused(lambda: recx.evaluate(run, "test", [10**6]), "K=1000000 is larger than the number of items (100)")
    assert set(recx.evaluate(run, "test", "5,10").results.k) == {5, 10}  # the command line's text works too
    refused(lambda: recx.load_run(5), "path 5: expected a path")
    refused(lambda: recx.load_run(tmp_path / "nothing"), "not a run folder recx wrote")
    refused(lambda: run.per_user("x"), "split 'x': expected valid or test")


def test_prepare_names_the_option_and_the_generators_setting(tmp_path):
    prepare = lambda **options: recx.prepare("s", format="synthetic", data_root=tmp_path, **options)  # noqa: E731
    refused(lambda: recx.prepare(5), "dataset name 5: expected letters, digits")
    refused(lambda: prepare(ratio="80/20"), "unknown option 'ratio' (did you mean 'ratios'?); valid: ratios, seed")
    refused(lambda: prepare(kcore=-1), "kcore -1: expected an integer >= 0 (0: off)")
    refused(lambda: prepare(seed="0"), "seed '0': expected an integer")
    refused(lambda: prepare(force=1), "force 1: expected True or False")
    refused(lambda: prepare(synthetic=[1]), "synthetic [1]: expected a mapping")
    refused(lambda: prepare(synthetic={"n_users": "x"}), "synthetic.n_users = 'x': expected an integer >= 1")
    refused(lambda: prepare(synthetic={"n_user": 10}), "synthetic: unknown setting 'n_user'; valid: n_users, n_items")
    refused(lambda: recx.prepare("s", format=3, data_root=tmp_path), "format 3: expected a non-empty str")
    refused(lambda: recx.prepare("s", format="lightgcn", source="", data_root=tmp_path), "source '': expected a path")
    assert not any(tmp_path.iterdir())


def test_sweep_report_lists_and_plugins_name_the_argument_at_fault(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiments = tmp_path / "e.yaml"
    experiments.write_text("experiments:\n  one:\n    datasets: [tiny]\n    methods:\n      bpr: {loss: bpr}\n")
    sweep = lambda **options: recx.sweep(experiments, "one", out=tmp_path / "out", dry_run=True, **options)  # noqa: E731
    refused(lambda: recx.sweep(None, "one"), "file None: expected a path")
    refused(lambda: recx.sweep(experiments, "../x"), "experiment name (--experiment) '../x': expected letters")
    refused(lambda: sweep(jobs="2"), "jobs '2': expected an integer >= 1")
    refused(lambda: sweep(jobs=0), "jobs 0: expected an integer >= 1")
    refused(lambda: sweep(backend="slurm"), "backend 'slurm': expected local or ray")
    refused(lambda: sweep(seeds=[]), "seeds []: expected comma-separated integers such as 0,1,2")
    refused(lambda: sweep(seeds=["0"]), "seeds ['0']: expected comma-separated integers")
    refused(lambda: sweep(methods=[""]), "methods ['']: expected a list of names (str)")
    refused(lambda: sweep(settings="epochs=1"), "settings 'epochs=1': expected a mapping")
    refused(lambda: sweep(max_runs=0), "max_runs 0: expected an integer >= 1")
    refused(lambda: recx.sweep(experiments, "one", dry_run="yes"), "dry_run 'yes': expected True or False")
    refused(lambda: sweep(console="screen"), "console 'screen': expected a rich Console")
    refused(lambda: recx.report(3, "o"), "results 3: expected a results.parquet path, or a non-empty list of them")
    refused(lambda: recx.report([], "o"), "results []: expected a results.parquet path")
    refused(lambda: recx.report("r.parquet", None), "out None: expected a path")
    refused(lambda: recx.report("r.parquet", "o", alpha=1), "alpha 1: expected a fraction in (0, 1)")
    refused(lambda: recx.report("r.parquet", "o", resamples=0), "resamples 0: expected an integer >= 1")
    refused(lambda: recx.report("r.parquet", "o", correction="fdr"), "correction 'fdr': expected holm or bonferroni")
    refused(lambda: recx.report("r.parquet", "o", pairs="some"), "pairs 'some': expected baseline or all")
    refused(lambda: recx.report("r.parquet", "o", ks=[0]), "ks [0]: cut-offs must be positive integers")
    refused(lambda: recx.report("r.parquet", "o", metrics=[]), "metrics []: expected at least one name")
    refused(lambda: recx.evaluate_lists(1, "tiny"), "lists 1: expected a path")
    refused(lambda: recx.evaluate_lists("l.tsv", "../tiny"), "dataset name '../tiny': expected letters")
    refused(lambda: recx.evaluate_lists("l.tsv", "tiny", "train"), "split 'train': expected valid or test")
    refused(lambda: recx.evaluate_lists("l.tsv", "tiny", ks=[0]), "ks [0]: cut-offs must be positive integers")
    refused(lambda: recx.evaluate_lists("l.tsv", "tiny", name=""), "name '': expected a non-empty str")
    refused(lambda: recx.use_plugins(3), "specs 3: expected a module name, or the path of a .py file or package")
    refused(lambda: recx.use_plugins(""), "specs '': expected a module name")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["e.yaml"]  # nothing was written


def test_the_command_line_gets_the_same_checks_naming_its_options(run, recx_cli, tmp_path):
    assert_user_error(recx_cli("eval", run.path, "--batch-size", "0"), "--batch-size 0: expected an integer >= 1")
    assert_user_error(recx_cli("eval", run.path, "--ks", "0"), "--ks '0': cut-offs must be positive integers")
    assert_user_error(recx_cli("eval", run.path, "--split", "x"), "--split 'x': expected valid or test")
    assert_user_error(recx_cli("eval", run.path, "--device", "gpu"), "--device 'gpu': expected auto, cpu, cuda")
    assert_user_error(recx_cli("eval", run.path, "--auc", "--opauc-beta", "2"), "--opauc-beta 2.0: expected a fraction")
    assert_user_error(recx_cli("sweep", "e.yaml", "-e", "x", "--seeds", "a"), "--seeds 'a': expected comma-separated")
    assert_user_error(recx_cli("sweep", "e.yaml", "-e", "x", "--jobs", "0"), "--jobs 0: expected an integer >= 1")
    assert_user_error(recx_cli("sweep", "e.yaml", "-e", "../x"), "experiment name (--experiment) '../x'")
    assert_user_error(recx_cli("report", "r.parquet", "--out", "o", "--alpha", "1"), "--alpha 1.0: expected a fraction")
    with pytest.raises(RecxError, match="^batch_size 0: "):  # and Python's names again after a command
        recx.evaluate(run, "test", [10], batch_size=0)
