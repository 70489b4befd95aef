"""Per-user results of a run: `per_user_<split>.parquet` beside `results.parquet`, so that methods can be compared
by paired tests over the same users and anyone can recompute the averages.

Columns: user (int32, the contiguous id), metric, k (int32), stratum, value (float64); one row per evaluated user
(users with at least one item in the split) and (metric, k, stratum). The mean of `value` over a (metric, k,
stratum) group is exactly the run's result for that key.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recx.eval.evaluator import Evaluation
from recx.runs.store import write_artifact

COLUMNS = ["user", "metric", "k", "stratum", "value"]


def file_name(split: str) -> str:
    return f"per_user_{split}.parquet"


def per_user_table(evaluation: Evaluation) -> pa.Table:
    evaluated, per_user = evaluation.per_user_values()
    keys = sorted(per_user)
    users = evaluated.cpu().numpy().astype("int32")
    n = users.size

    def labels(values: list[str]) -> pa.DictionaryArray:
        names, codes = np.unique(np.array(values), return_inverse=True)
        return pa.DictionaryArray.from_arrays(pa.array(np.repeat(codes.astype("int32"), n)), pa.array(names.tolist()))

    return pa.table(
        {
            "user": pa.array(np.tile(users, len(keys))),
            "metric": labels([metric for metric, _, _ in keys]),
            "k": pa.array(np.repeat(np.array([k for _, k, _ in keys], dtype="int32"), n)),
            "stratum": labels([stratum for _, _, stratum in keys]),
            "value": pa.array(np.concatenate([per_user[key].numpy() for key in keys])),
        }
    )


def write_per_user(folder: Path, split: str, evaluation: Evaluation) -> None:
    """Written whole, its checksum recorded (recx.runs.store.write_artifact)."""
    table = per_user_table(evaluation)
    write_artifact(Path(folder), file_name(split), lambda path: pq.write_table(table, path, compression="zstd"))
