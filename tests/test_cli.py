"""The command line end to end on tiny data, and its handling of bad input (one message, exit 1, nothing left)."""

import json
import math

import pandas as pd
import pytest
import yaml

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "20", "--quiet", "--device", "cpu"]


def test_prepare_train_eval_dump_topk_recomputes_the_metrics(tiny_root, tmp_path, recx_cli):
    run = tmp_path / "run"
    result = recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST)
    assert result.code == 0, result.err
    assert (run / "COMPLETE").is_file() and (run / "config.yaml").is_file()
    environment = json.loads((run / "environment.json").read_text())
    assert environment["seed"] == 0 and len(environment["data_hash"]) == 64 and "torch" in environment["packages"]
    topk_file = tmp_path / "top.parquet"
    result = recx_cli("eval", run, "--ks", "5,10", "--dump-topk", topk_file, "--batch-size", "13")
    assert result.code == 0, result.err
    reported = pd.read_parquet(run / "eval_test.parquet")
    top = pd.read_parquet(topk_file)
    test = pd.read_parquet(tiny_root / "tiny" / "test.parquet")
    relevant = test.groupby("user")["item"].apply(set)
    items = pd.read_parquet(tiny_root / "tiny" / "items.parquet")["id"]
    assert (top["item"] == items[top.item_index].to_numpy()).all()  # original ids beside the contiguous ones
    top = top.assign(user=top.user_index, item=top.item_index)
    # independent recomputation from the dump with pandas
    top["hit"] = [item in relevant[user] for user, item in zip(top.user, top.item, strict=True)]
    for k in (5, 10):
        head = top[top["rank"] <= k]
        recall = (head.groupby("user")["hit"].sum() / relevant.map(len)).mean()
        dcg = (head.hit / (head["rank"] + 1).map(math.log2)).groupby(head.user).sum()
        idcg = relevant.map(lambda s, k=k: sum(1 / math.log2(r + 2) for r in range(min(k, len(s)))))
        ndcg = (dcg / idcg).mean()
        at_k = reported[(reported.k == k) & (reported.stratum == "all")].set_index("metric").value
        assert at_k["recall"] == pytest.approx(recall, abs=1e-12)
        assert at_k["ndcg"] == pytest.approx(ndcg, abs=1e-12)


def test_same_seed_gives_the_same_numbers(tiny_root, tmp_path, recx_cli, train_tiny):
    for name in ("a", "b"):
        assert (
            train_tiny(
                tmp_path / name,
                "--sampler",
                "popularity",
                *FAST,
            ).code
            == 0
        )
    first, second = (pd.read_parquet(tmp_path / n / "results.parquet") for n in ("a", "b"))
    pd.testing.assert_frame_equal(first, second)


def test_config_file_and_set_override(tiny_root, tmp_path, recx_cli):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"dataset": "tiny", "loss": "bpr", "n_negatives": 3, "epochs": 1, "dim": 4}))
    result = recx_cli(
        "train",
        "--config",
        config,
        "--data-root",
        tiny_root,
        "--run-dir",
        tmp_path / "r",
        "--set",
        "lr=0.01",
        "--set",
        "sampler_args.exclude_train=true",
        "--quiet",
    )
    assert result.code == 0, result.err
    saved = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert saved["lr"] == 0.01 and saved["sampler_args"]["exclude_train"] is True and saved["loss"] == "bpr"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["prepare", "x", "--format", "triplets", "--source", "/no/such/file"], "no such file"),
        (["prepare", "x", "--format", "nope", "--source", "."], "valid: "),
        (["train", "--dataset", "tiny", "--loss", "nope"], "unknown loss 'nope'; valid: "),
        (["train", "--dataset", "tiny", "--sampler", "nope"], "unknown sampler 'nope'; valid: "),
        (["train", "--dataset", "tiny", "--model", "nope"], "unknown model 'nope'; valid: "),
        (["train", "--dataset", "missing"], "no prepared dataset 'missing'"),
        (["train", "--dataset", "tiny", "--set", "sampler_args.nope=1"], "unknown key 'nope'"),
    ],
)
def test_bad_input_gets_one_clear_message(tiny_root, recx_cli, args, expected):
    result = recx_cli(*args, "--data-root", tiny_root)
    assert result.code == 1
    assert expected in result.err.replace("\n", " ")
    assert "Traceback" not in result.err + result.out


def test_malformed_line_is_named_and_nothing_is_left(tmp_path, recx_cli):
    source = tmp_path / "pairs.txt"
    source.write_text("1 2\n1 3\nx 4\n")
    result = recx_cli("prepare", "bad", "--format", "triplets", "--source", source, "--data-root", tmp_path / "d")
    assert result.code == 1 and "line 3" in result.err
    assert not list((tmp_path / "d").iterdir())  # nothing, not even a lock file


def test_threshold_that_removes_everything(tmp_path, recx_cli):
    source = tmp_path / "ratings.txt"
    source.write_text("1 2 1\n2 3 2\n")
    result = recx_cli(
        "prepare",
        "empty",
        "--format",
        "triplets",
        "--source",
        source,
        "--rating",
        ">=4",
        "--data-root",
        tmp_path / "d",
    )
    assert result.code == 1 and "Traceback" not in result.err
    assert not (tmp_path / "d" / "empty").exists()


def test_unknown_key_in_config_file_is_named(tiny_root, tmp_path, recx_cli):
    config = tmp_path / "run.yaml"
    config.write_text("dataset: tiny\nlearning_rate: 0.1\n")
    result = recx_cli("train", "--config", config, "--data-root", tiny_root)
    assert result.code == 1 and "learning_rate" in result.err and str(config) in result.err.replace("\n", "")


def test_eval_rejects_incomplete_runs_and_large_k(tiny_root, tmp_path, recx_cli):
    (tmp_path / "half").mkdir()
    result = recx_cli("eval", tmp_path / "half")
    assert result.code == 1 and "not a completed run" in result.err
    run = tmp_path / "run"
    assert recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST).code == 0
    result = recx_cli("eval", run, "--ks", "10,5000")
    assert result.code == 1 and "larger than the number of items" in result.err.replace("\n", " ")


def test_nan_loss_stops_with_epoch_and_step(tiny_root, tmp_path, recx_cli, train_tiny):
    run = tmp_path / "nan"
    result = train_tiny(
        run,
        "--lr",
        "1e30",
        "--loss",
        "bpr",
        "--epochs",
        "3",
        "--quiet",
        "--device",
        "cpu",
    )
    assert result.code == 1
    message = result.err.replace("\n", " ")
    assert "the loss became nan at epoch" in message and ", step " in message and "Traceback" not in message
    assert not run.exists()
