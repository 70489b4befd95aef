"""`recx report` refuses a results file it would misread before it creates anything (issue 37, item 5)."""

import pandas as pd
import pytest

COLUMNS = {
    "run_id": ["a", "b"],
    "dataset": ["d", "d"],
    "loss": ["bpr", "bpr"],
    "sampler": ["uniform", "uniform"],
    "seed": [0, 1],
    "split": ["test", "test"],
    "metric": ["ndcg", "ndcg"],
    "k": [20, 20],
    "stratum": ["all", "all"],
    "value": [0.1, 0.2],
}


@pytest.mark.parametrize(
    "column, values, expected",
    [("value", ["0.1", "0.2"], "numbers"), ("value", [True, False], "numbers"), ("k", ["20", "20"], "integers")],
)
def test_a_results_column_of_another_type_is_named_before_the_report_folder(
    tmp_path, recx_cli, column, values, expected
):
    path = tmp_path / "results.parquet"
    pd.DataFrame({**COLUMNS, column: values}).to_parquet(path)
    result = recx_cli("report", path, "--out", tmp_path / "report")
    assert result.code == 1 and "Traceback" not in result.err, result.err
    assert f"error: {path}: column {column!r} holds" in result.err and f"expected {expected}" in result.err
    assert not (tmp_path / "report").exists()
