"""Per-user results of a run: `per_user_<split>.parquet` beside `results.parquet`, so that methods can be compared
by paired tests over the same users and anyone can recompute the averages; and the top-K lists with the catalogue
they were scored against, from which the catalogue-level metrics' bootstrap intervals and paired tests are drawn.

`per_user_<split>.parquet`: user (int32, the contiguous id), metric, k (int32), stratum, value (float64); one row
per evaluated user (users with at least one item in the split) and (metric, k, stratum) of the per-user metrics,
but for the users a `needs_list` metric (ARP, APLT, EPC) has no value for (no list: evaluated lists only). The mean
of `value` over a (metric, k, stratum) group is exactly the run's result for that key, and its row count the users
it averages.

`topk_<split>.parquet`: user, rank (1 first), item (int32 contiguous ids), one row per listed place of every
evaluated user (a short list has fewer rows; a user without a list one row of rank 0, item -1); metadata `k`. `catalogue.parquet`: popularity (float64, training
interactions) and stratum (int8) per item, metadata `n_users` (users with a training interaction). A catalogue-level
metric's value is the metric of the lists' counts (recx.eval.catalogue.Exposure) against that catalogue.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recx.eval.catalogue import Catalogue
from recx.eval.evaluator import Evaluation
from recx.runs.store import read_parquet, write_artifact

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

    values = np.concatenate([per_user[key].numpy() for key in keys]) if keys else np.zeros(0)
    table = pa.table(
        {
            "user": pa.array(np.tile(users, len(keys))),
            "metric": labels([metric for metric, _, _ in keys]),
            "k": pa.array(np.repeat(np.array([k for _, k, _ in keys], dtype="int32"), n)),
            "stratum": labels([stratum for _, _, stratum in keys]),
            "value": pa.array(values),
        }
    )
    valued = ~np.isnan(values)  # a needs_list metric of a user without a list: no row
    return table if valued.all() else table.filter(pa.array(valued))


def write_per_user(folder: Path, split: str, evaluation: Evaluation) -> None:
    """Written whole, its checksum recorded (recx.runs.store.write_artifact)."""
    table = per_user_table(evaluation)
    write_artifact(Path(folder), file_name(split), lambda path: pq.write_table(table, path, compression="zstd"))


CATALOGUE = "catalogue.parquet"


def topk_name(split: str) -> str:
    return f"topk_{split}.parquet"


def write_topk(folder: Path, split: str, evaluation: Evaluation) -> None:
    """topk_<split>.parquet and catalogue.parquet of an evaluation that kept its lists and catalogue."""
    users, items = evaluation.listed()
    if evaluation.catalogue is None:
        raise ValueError("this evaluation has no catalogue")
    items = items.cpu()
    k = items.shape[1]
    listed = items >= 0
    kept = torch.cat([listed, ~listed.any(1, keepdim=True)], dim=1).reshape(-1).numpy()  # rank 0: a user without list
    ranks = np.tile(np.append(np.arange(1, k + 1), 0).astype("int16"), users.numel())
    table = pa.table(
        {
            "user": pa.array(users.cpu().repeat_interleave(k + 1).numpy().astype("int32")[kept]),
            "rank": pa.array(ranks[kept]),
            "item": pa.array(
                torch.cat([items, items[:, :1].clamp_max(-1)], 1).reshape(-1).numpy().astype("int32")[kept]
            ),
        }
    ).replace_schema_metadata({b"k": str(k).encode()})
    write_artifact(Path(folder), topk_name(split), lambda path: pq.write_table(table, path, compression="zstd"))
    catalogue = evaluation.catalogue
    facts = pa.table(
        {
            "popularity": pa.array(catalogue.popularity.cpu().numpy()),
            "stratum": pa.array(catalogue.strata.cpu().numpy().astype("int8")),
        }
    ).replace_schema_metadata({b"n_users": str(catalogue.n_users).encode()})
    write_artifact(Path(folder), CATALOGUE, lambda path: pq.write_table(facts, path, compression="zstd"))


def has_topk(folder: Path, split: str) -> bool:
    return (Path(folder) / topk_name(split)).is_file() and (Path(folder) / CATALOGUE).is_file()


def read_topk(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(users int64 [U] ascending, items int64 [U, K] with -1 where a list ends) of a run's topk_<split>.parquet."""
    remedy = "evaluate the run again (recx eval) or train it again with --force"
    frame = read_parquet(Path(folder), topk_name(split), remedy)
    k = int(pq.read_schema(Path(folder) / topk_name(split)).metadata[b"k"])
    users, row = np.unique(frame["user"].to_numpy(), return_inverse=True)
    items = np.full((users.size, k + 1), -1, dtype=np.int64)
    items[row, frame["rank"].to_numpy().astype(np.int64) - 1] = frame["item"].to_numpy()  # rank 0: the last column
    items = items[:, :k]
    return users.astype(np.int64), items


def read_catalogue(folder: Path) -> Catalogue:
    remedy = "evaluate the run again (recx eval) or train it again with --force"
    frame = read_parquet(Path(folder), CATALOGUE, remedy)
    n_users = int(pq.read_schema(Path(folder) / CATALOGUE).metadata[b"n_users"])
    return Catalogue(
        torch.from_numpy(frame["popularity"].to_numpy(np.float64, copy=True)),
        torch.from_numpy(frame["stratum"].to_numpy().astype(np.int64)),
        n_users,
    )
