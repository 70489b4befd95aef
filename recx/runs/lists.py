"""Top-K lists written by any system, evaluated by recx's protocol: the same metrics, popularity strata and per-user
files as a recx run, in a run-like folder that `recx report` puts beside recx's runs with the same paired tests.

The lists: Parquet, or text with a header row (tab-separated, or comma-separated for `.csv`), with columns `user`,
`item` and `rank` (1 first) or `score` (highest first), in the dataset's original ids (its users.parquet and
items.parquet; recx's own `--dump-topk` writes them). Each user's list is cut at K = max(ks). The file's columns,
their types and its ranks or scores are checked before the dataset is loaded (a missing column is refused at once, not
after ~30 s of loading).

Refused, with a count and examples: users or items the dataset does not have, an item listed twice for one user, two
items at the same rank in one user's list (their order would be the file's row order), a rank that is not a positive
integer, a score that is not a finite number. Equal scores within a list are ordered by the item's position in the
dataset's items.parquet (its contiguous id), never by the file's row order, and counted in a note. Noted, with a
count: evaluated users without a list and lists shorter than K, listed items that recx's own ranking excludes for
the split (the user's training items, and for test its validation items: here they are misses), lists of users
without a held-out item (not evaluated). A missing list or place is a miss for the accuracy metrics (NDCG, Recall,
...: every evaluated user counts); the metrics of a list's items (`needs_list`: ARP, APLT, EPC) are computed over the
items a list holds, so a short list over its own items and a user without a list not at all (the average runs over
the users with a list); the catalogue-level metrics count the items of the lists there are. The notes and
lists.json (`listed_users`) say how many users have a list.

The folder (`runs/<id>` by default, the id a hash of the lists, the data and the split; `--out`): `lists.json` (the
source file and its sha256, the dataset and its data hash, the split, the cut-offs, the counts above),
`results.parquet` (recx's long format with `method` the lists' name), `per_user_<split>.parquet`, checksums and
`COMPLETE`, written aside and swapped in when complete (a killed command leaves no half-written folder under the
name). A folder that already holds an evaluation of lists is refused unless `force`; with `force` the old one stays
whole until the new one is swapped in. The folder is locked while it is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recx.core.errors import RecxError
from recx.core.folders import clean_stale, failure_reason, swap_in, temp_sibling, writable_folder, write_text_atomic
from recx.core.lock import exclusive
from recx.core.names import check_name
from recx.core.words import counted
from recx.data.dataset import Dataset
from recx.data.dataset_folder import IDENTITY, read_ids, sha256_of
from recx.eval.evaluator import Evaluation, excluded_splits, score_lists
from recx.eval.metrics.registry import cutoff_metrics, heading
from recx.runs import store
from recx.runs.per_user import CATALOGUE, topk_name, write_per_user, write_topk

EXAMPLES = 3
ARTICLES = {"user": "a", "item": "an"}


@dataclass
class ListsOutcome:
    folder: Path
    results: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def _check_columns(path: Path, columns: list[str]) -> None:
    missing = [column for column in ("user", "item") if column not in columns]
    if missing or not {"rank", "score"} & set(columns):
        raise RecxError(f"{path}: expected columns user, item and rank or score (found {', '.join(map(str, columns))})")


def _check_parquet_types(path: Path, schema: pa.Schema) -> None:
    """Ids are integers or text, a rank an integer, a score a number (a list or a struct column was read as text)."""
    for column in ("user", "item", "rank", "score"):
        if column not in schema.names:
            continue
        kind = schema.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        integer, text = pa.types.is_integer(kind), pa.types.is_string(kind) or pa.types.is_large_string(kind)
        allowed = {
            "user": (integer or text, "integers or text"),
            "item": (integer or text, "integers or text"),
            "rank": (integer or pa.types.is_floating(kind), "integers"),
            "score": (integer or pa.types.is_floating(kind), "numbers"),
        }[column]
        if not allowed[0]:
            raise RecxError(f"{path}: column {column} holds {kind}; expected {allowed[1]}")


def read_lists(path: Path) -> pd.DataFrame:
    """The lists file as a frame with string `user` and `item` and a numeric `rank` or `score`, checked as far as it
    can be without the dataset: its columns and their types first (a Parquet file's schema, a text file's header),
    then its ranks (positive integers, distinct within a user's list) or scores (finite numbers)."""
    if not path.is_file():
        raise RecxError(f"{path}: no such lists file")
    sep = "," if path.suffix == ".csv" else "\t"
    try:
        if path.suffix == ".parquet":
            schema = pq.read_schema(path)
            _check_columns(path, schema.names)
            _check_parquet_types(path, schema)
            frame = pd.read_parquet(path)
        else:
            _check_columns(path, list(pd.read_csv(path, sep=sep, nrows=0).columns))
            frame = pd.read_csv(path, sep=sep, dtype={"user": str, "item": str})
    except RecxError:
        raise
    except Exception as error:  # pandas and pyarrow raise several types for a file they cannot parse
        raise RecxError(f"{path}: not a readable lists file ({type(error).__name__}: {error})") from None
    missing = frame[["user", "item"]].isna().any(axis=1)
    if missing.any():
        raise RecxError(f"{path}: {counted(int(missing.sum()), 'row')} without a user or an item")
    frame = frame.assign(user=frame["user"].astype(str), item=frame["item"].astype(str))
    return _ordering_key(frame, path)


def _ordering_key(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """`key`: the rank, or minus the score; bad ranks or scores and equal ranks within a user's list are refused."""
    if "rank" in frame.columns:
        rank = pd.to_numeric(frame["rank"], errors="coerce")
        bad = frame["rank"][~(rank.notna() & (rank >= 1) & (rank == rank.round()))]
        if len(bad):
            what = "is not a positive integer" if len(bad) == 1 else "are not positive integers"
            raise RecxError(f"{path}: {counted(len(bad), 'rank')} {what} ({_examples(bad)})")
        frame = frame.assign(key=rank.to_numpy(dtype=float))
        shared = frame[frame.duplicated(["user", "key"], keep=False)]
        if len(shared):
            places = shared.groupby(["user", "key"], sort=False)["item"].apply(list)
            (user, rank_at), items = next(iter(places.items()))
            raise RecxError(
                f"{path}: {counted(len(places), 'rank')} of a user's list {'is' if len(places) == 1 else 'are'} "
                f"given to two items or more (e.g. user {user!r} rank {int(rank_at)}: "
                f"{', '.join(map(repr, items[:EXAMPLES]))}); ranks must differ within a user's list"
            )
        return frame
    score = pd.to_numeric(frame["score"], errors="coerce")
    bad = frame["score"][~np.isfinite(score.to_numpy(dtype=float, na_value=np.nan))]
    if len(bad):
        what = "is not a finite number" if len(bad) == 1 else "are not finite numbers"
        raise RecxError(f"{path}: {counted(len(bad), 'score')} {what} ({_examples(bad)})")
    return frame.assign(key=-score.to_numpy(dtype=float))


def _examples(values) -> str:
    shown = ", ".join(repr(value) for value in list(dict.fromkeys(values))[:EXAMPLES])
    return f"e.g. {shown}"


def _codes(frame: pd.DataFrame, column: str, ids, path: Path, dataset: Dataset) -> np.ndarray:
    """Each row's contiguous id for its original `column` id; unknown ids are refused."""
    if ids is None:
        raise RecxError(f"{dataset.folder}: no {column}s.parquet (the original ids); prepare the dataset again")
    codes = pd.Index(ids.to_pylist()).get_indexer(frame[column])
    unknown = frame[column][codes < 0]
    if len(unknown):
        distinct = unknown.nunique()
        raise RecxError(
            f"{path}: {counted(distinct, column)} ({counted(len(unknown), 'row')}) {'is' if distinct == 1 else 'are'} "
            f"not {ARTICLES[column] + ' ' + column if distinct == 1 else column + 's'} of dataset {dataset.name!r} "
            f"({_examples(unknown)}); the lists must use the dataset's original ids ({column}s.parquet)"
        )
    return codes


def _order(frame: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Rows sorted by user, then rank (or descending score, equal scores by the item's contiguous id), with each
    row's place in its user's list; a note counts the lists with equal scores."""
    frame = frame.sort_values(["user_code", "key", "item_code"], kind="stable")
    repeated = frame.duplicated(["user_code", "item_code"])
    if repeated.any():
        pairs = [f"{u}/{i}" for u, i in zip(frame.user[repeated], frame.item[repeated], strict=True)]
        count = int(repeated.sum())
        raise RecxError(
            f"{path}: {counted(count, 'item')} {'is' if count == 1 else 'are'} listed twice for one user "
            f"({_examples(pairs)})"
        )
    notes = []
    if "score" in frame.columns and "rank" not in frame.columns:
        tied = frame.duplicated(["user_code", "key"], keep=False)
        if tied.any():
            lists = frame.user_code[tied].nunique()
            notes.append(
                f"{counted(lists, 'list')} {'holds' if lists == 1 else 'hold'} equal scores "
                f"({counted(int(tied.sum()), 'item')} share a score with another item of the same list): equal scores "
                "are ordered by the item's position in the dataset's items.parquet, not by the file's row order"
            )
    return frame.assign(place=frame.groupby("user_code", sort=False).cumcount().to_numpy()), notes


def ranked_items(
    path: Path, dataset: Dataset, users: torch.Tensor, k: int, frame: pd.DataFrame | None = None
) -> tuple[torch.Tensor, list[str]]:
    """(items [len(users), k]: each user's listed items in rank order, -1 where the list ends or is missing;
    notes on what was counted but not refused). `frame`: the file as `read_lists` read it (read now when None)."""
    frame = read_lists(path) if frame is None else frame
    frame = frame.assign(
        user_code=_codes(frame, "user", read_ids(dataset.folder, "users"), path, dataset),
        item_code=_codes(frame, "item", read_ids(dataset.folder, "items"), path, dataset),
    )
    frame, notes = _order(frame, path)
    row_of = np.full(dataset.n_users, -1, dtype=np.int64)
    row_of[users.cpu().numpy()] = np.arange(users.numel())
    rows = row_of[frame.user_code.to_numpy()]
    evaluated = rows >= 0
    ignored = frame.user_code[~evaluated].nunique()
    if ignored:
        notes.append(
            f"{counted(ignored, 'listed user')} {'has' if ignored == 1 else 'have'} no held-out item in the split "
            "(not evaluated)"
        )
    lengths = np.bincount(rows[evaluated], minlength=users.numel())
    listless = int((lengths == 0).sum())
    listed = users.numel() - listless
    per_list, whole = _metric_names()
    if listless:
        notes.append(
            f"{counted(listless, 'evaluated user')} {'has' if listless == 1 else 'have'} no list: all misses for the "
            f"accuracy metrics; {per_list} are averaged over the {counted(listed, 'user')} with a list, and {whole} "
            f"count {'its' if listed == 1 else 'their'} {counted(listed, 'list')}"
        )
    short = int(((lengths > 0) & (lengths < k)).sum())
    if short:
        notes.append(
            f"{counted(short, 'list')} {'is' if short == 1 else 'are'} shorter than K={k}: the missing places are "
            f"misses for the accuracy metrics; {per_list} of a list are over the items it holds"
        )
    keep = evaluated & (frame.place.to_numpy() < k)
    items = torch.full((users.numel(), k), -1, dtype=torch.long)
    items[torch.from_numpy(rows[keep]), torch.from_numpy(frame.place.to_numpy()[keep])] = torch.from_numpy(
        frame.item_code.to_numpy()[keep].astype(np.int64)
    )
    return items, notes


def _metric_names() -> tuple[str, str]:
    """("ARP, APLT, EPC", "Coverage, Gini, ..."): the registered per-user metrics of a list's items (`needs_list`) and
    the catalogue-level metrics, by their headings, for the notes."""
    per_list = [heading(name) for name, metric in cutoff_metrics() if metric.needs_list]
    whole = [heading(name) for name, _ in cutoff_metrics("catalogue")]
    return ", ".join(per_list) or "no metric", f"the catalogue-level metrics ({', '.join(whole) or 'none'})"


def listed_users(folder: Path) -> tuple[int, int] | None:
    """(users with a list, evaluated users) of a folder of evaluated lists (its lists.json), None for any other
    folder or a lists.json that does not record them."""
    try:
        record = json.loads((folder / store.LISTS_FILE).read_text())
        return int(record["listed_users"]), int(record["users"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _excluded_note(dataset: Dataset, split: str, users: torch.Tensor, items: torch.Tensor) -> str | None:
    """The note on listed items that recx's own ranking leaves out for `split` (recx.eval.evaluator.excluded_splits:
    the user's training items, and for test its validation items), counted apart; None when there are none."""
    listed = items >= 0
    rows = users[:, None].expand_as(items)
    kinds = ("training", "validation")
    counts = [
        int((csr.contains(rows, items.clamp_min(0)) & listed).sum())
        for csr in excluded_splits(dataset, split)[: len(kinds)]
    ]
    if not any(counts):
        return None
    parts = [
        f"{count:,} {'is a' if count == 1 else 'are'} {kind} item{'' if count == 1 else 's'}"
        for count, kind in zip(counts, kinds, strict=False)
        if count
    ]
    total = sum(counts)
    ranking = {"test": "test", "valid": "validation"}[split]
    return (
        f"{counted(total, 'listed item')}: {' and '.join(parts)} of their user (recx's own {ranking} ranking leaves "
        f"{'it' if total == 1 else 'them'} out; here {'it counts as a miss' if total == 1 else 'they count as misses'})"
    )


def check_folder(folder: Path, force: bool) -> str:
    """The state of `folder` for new lists (recx.runs.store.state); refused: a recx run, a folder recx did not
    write, and unless `force` one that already holds evaluated lists."""
    current = store.state(folder)
    if folder.exists() and not folder.is_dir():
        raise RecxError(f"{folder} is a file, not a folder; choose another --out")
    if (folder / "config.yaml").exists() or current in ("incomplete", "trained"):
        raise RecxError(f"{folder} holds a recx run, not evaluated lists; choose another --out")
    if current == "foreign":
        raise RecxError(f"{folder} holds files recx did not write for lists; choose another --out")
    if current == "complete" and not force:
        try:
            old = json.loads((folder / store.LISTS_FILE).read_text())
            what = f" ({old['name']!r}: {old['source']}, split {old['split']})"
        except (OSError, ValueError, KeyError, TypeError):
            what = ""
        raise RecxError(
            f"{folder} already holds an evaluation of lists{what}; pass --force to replace it (the new one is "
            "written aside and swapped in when complete), or choose another --out"
        )
    return current


def lists_evaluation(
    path: Path,
    dataset: Dataset,
    split: str,
    ks: list[int],
    folder: Path | None,
    name: str | None,
    force: bool = False,
    frame: pd.DataFrame | None = None,
) -> ListsOutcome:
    """Evaluate the lists in `path` (`frame`: as `read_lists` read them) on `dataset`'s `split` at cut-offs `ks`
    into `folder` (default runs/<id>); a folder that holds evaluated lists is replaced only with `force`."""
    target = dataset.split(split)
    if max(ks) > dataset.n_items:
        raise RecxError(f"K={max(ks)} is larger than the number of items ({dataset.n_items})")
    users = torch.nonzero(target.row_lengths() > 0).flatten()
    if users.numel() == 0:
        raise RecxError(f"no user has a {split} item")
    items, notes = ranked_items(path, dataset, users, max(ks), frame)
    excluded = _excluded_note(dataset, split, users, items)
    if excluded:
        notes.append(excluded)
    evaluation = score_lists(dataset, split, users, items, ks)
    digest = sha256_of(path)
    run_id = hashlib.sha256(f"{digest} {dataset.data_hash} {split} {ks}".encode()).hexdigest()[:12]
    label = name or path.stem
    folder = folder if folder is not None else Path("runs") / run_id
    results = lists_results(run_id, label, dataset.name, split, evaluation.values)
    record = {
        "name": label,
        "source": str(path.resolve()),
        "sha256": digest,
        "dataset": dataset.name,
        "data_folder": str(dataset.folder),
        "data_hash": dataset.data_hash,
        "data_identity": IDENTITY,
        "split": split,
        "ks": ks,
        "users": users.numel(),
        "listed_users": evaluation.n_listed,
        "notes": notes,
    }
    check_name(folder.name, "lists folder name (--out)")
    writable_folder(folder.parent, "runs folder")
    with exclusive(folder.parent / f".{folder.name}.lock", f"lists {folder.name}"):
        clean_stale(folder)
        current = check_folder(folder, force)
        _write(folder, current, record, evaluation, results, split)
    return ListsOutcome(folder, results, notes)


def _write(folder: Path, current: str, record: dict, evaluation: Evaluation, results: pd.DataFrame, split: str):
    """The folder's files, written into a temporary sibling swapped in when complete (a kill leaves no half-written
    folder under the name), or into an empty `folder` the user made (its files removed again on failure)."""
    replacing = current == "complete"
    target = folder if current == "empty" else temp_sibling(folder)
    kept = f"{folder} is unchanged" if replacing else "nothing was kept"
    try:
        target.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target / store.LISTS_FILE, json.dumps(record, indent=2) + "\n", kept)
        write_per_user(target, split, evaluation)
        write_topk(target, split, evaluation)
        store.write_results(target, results, kept=kept)
        store.mark_complete(target)
        if target != folder:
            swap_in(target, folder)
    except OSError as exc:
        _remove(target, replacing or current == "absent", folder)
        raise RecxError(f"{folder}: cannot write the evaluated lists ({failure_reason(folder, exc)}); {kept}") from None
    except BaseException:
        _remove(target, replacing or current == "absent", folder)
        raise


def _remove(target: Path, whole: bool, folder: Path) -> None:
    """What a failed write leaves: the temporary sibling or the folder this command created, removed whole; in a
    folder that was empty, only the files lists write."""
    if whole:
        shutil.rmtree(target, ignore_errors=True)
        return
    names = (store.LISTS_FILE, "results.parquet", "per_user_valid.parquet", "per_user_test.parquet", CATALOGUE)
    for name in (*names, topk_name("valid"), topk_name("test")):
        (folder / name).unlink(missing_ok=True)
    for name in (store.CHECKSUMS, store.COMPLETE):
        (folder / name).unlink(missing_ok=True)


def lists_results(run_id: str, name: str, dataset: str, split: str, values: dict) -> pd.DataFrame:
    """recx's long results format, with `method` the lists' name (model `lists`, no loss or sampler)."""
    run = {"run_id": run_id, "dataset": dataset, "model": "lists", "loss": name, "sampler": "", "seed": 0}
    return store.result_rows(run, split, values).assign(method=name)
