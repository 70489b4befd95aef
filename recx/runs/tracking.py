"""Optional experiment tracking: completed runs into MLflow (`--track mlflow`, or `track: mlflow` in an experiment;
needs the `track` extra: pip install 'recx[track]').

Each run is read back from its folder once it is complete, so training is untouched: the resolved config.yaml as
parameters (nested args dotted: sampler_args.m), epochs.jsonl's per-epoch loss, seconds and validation metric as
metric histories (step = epoch), results.parquet's final metrics as `<split>/<metric>_at_<k>[/<stratum>]`, and the
folder's files as artifacts; tags recx.run_id, recx.folder, and a sweep's method and grid point. A sweep's runs go
to one MLflow experiment named after it; `recx train` uses the experiment "recx train".
Where: --track-uri, else $MLFLOW_TRACKING_URI, else a local store under the output (the runs folder of `recx
train`, the output folder of a sweep): mlflow.db (SQLite) and mlartifacts/.
Tracking is not part of a run's config (same run id, same folder, with or without it), and a run already logged in
that experiment (same run id and completion time) is not logged twice.
Asked for, tracking is checked before any work (`choose`): mlflow must import and the store must open (an unknown
scheme, a server out of reach, a database this mlflow cannot read), else a RecxError names what failed. A store that
does not exist yet is not created by the check: a SQLite one is tried in a temporary folder, beside a check that its
folder can be written. A failure once the runs are done is one warning; the run or the sweep ends as it would have.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from recx.core.errors import RecxError

SERVICES = ("mlflow",)
TRAIN_EXPERIMENT = "recx train"
PARAMS_BATCH, METRICS_BATCH = 100, 1000  # the most one MLflow log_batch call accepts


@dataclass(frozen=True)
class Tracking:
    """What the command line asked for (service None: nothing, unless an experiment's `track` says so)."""

    service: str | None
    uri: str | None = None


@dataclass
class TrackedRun:
    """A completed run folder and how it is named and tagged in MLflow."""

    folder: Path
    name: str
    tags: dict = field(default_factory=dict)


def warn(message: str) -> None:
    Console(stderr=True).print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def choose(
    service: str | None, uri: str | None, from_experiment=None, where: str = "", home: Path | None = None
) -> Tracking | None:
    """The tracking asked for (the command line's --track, else an experiment's `track`), or None, checked before any
    work: an unknown service, mlflow missing or broken, or a store that does not open is a user error. `home`: where
    the default store goes (None: only whether this mlflow can open one is checked)."""
    asked = "--track mlflow"
    if service is None and from_experiment is not None:
        if from_experiment not in SERVICES:
            raise RecxError(f"{where}: track = {from_experiment!r}: expected {' or '.join(SERVICES)}")
        service, asked = from_experiment, f"{where}: track = {from_experiment}"
    if service is None:
        if uri is not None:
            raise RecxError("--track-uri needs --track mlflow")
        return None
    if service not in SERVICES:
        raise RecxError(f"--track {service!r}: expected {' or '.join(SERVICES)}")
    tracking = Tracking(service, uri)
    _check_store(tracking, home, asked)
    return tracking


def _quiet_mlflow() -> None:
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")  # a server out of reach: seconds, not minutes
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def store_uri(tracking: Tracking, home: Path) -> str:
    """--track-uri, else $MLFLOW_TRACKING_URI, else mlflow.db (SQLite) under `home`."""
    return tracking.uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(home / 'mlflow.db').resolve()}"


def _check_store(tracking: Tracking, home: Path | None, asked: str) -> None:
    """RecxError unless mlflow imports and the store opens; a SQLite file not there yet is left uncreated."""
    try:
        _quiet_mlflow()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from mlflow import MlflowClient
    except ImportError:
        raise RecxError(
            f"{asked}: mlflow is not installed (pip install 'recx[track]'); install it, or leave out tracking"
        ) from None
    except Exception as error:  # a broken install raises whatever its imports raise
        raise RecxError(
            f"{asked}: mlflow does not import ({_first_line(error)}); repair it, or leave out tracking"
        ) from None
    uri = store_uri(tracking, home or Path(tempfile.gettempdir()) / "recx-mlflow-check")
    database = Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
    try:
        with warnings.catch_warnings(), tempfile.TemporaryDirectory() as scratch:
            warnings.simplefilter("ignore")
            if database is not None and not database.exists():
                _check_writable(database, asked)
                uri = f"sqlite:///{Path(scratch) / 'check.db'}"
            MlflowClient(uri).search_experiments(max_results=1)
    except RecxError:
        raise
    except Exception as error:  # mlflow and its stores raise many types
        raise RecxError(
            f"{asked}: the MLflow store {uri} does not open ({_first_line(error)}); give a store this mlflow can "
            "open (--track-uri, $MLFLOW_TRACKING_URI), or leave out tracking"
        ) from None


def _check_writable(database: Path, asked: str) -> None:
    """The nearest existing folder of a SQLite store to be created must be writable."""
    folder = database.parent
    while not folder.exists():
        folder = folder.parent
    if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
        raise RecxError(f"{asked}: the MLflow store {database} cannot be created ({folder} is not a writable folder)")


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    shown = text if len(text) <= 200 else f"{text[:200]}..."
    return f"{type(error).__name__}: {shown}" if text else type(error).__name__


def metric_key(name: str) -> str:
    """An MLflow metric name (letters, digits, _ - . / and spaces): ndcg@20 -> ndcg_at_20."""
    return re.sub(r"[^\w\-./ ]", "_", name.replace("@", "_at_"))


def flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _final_metrics(folder: Path) -> dict[str, float]:
    import pandas as pd

    results = pd.read_parquet(folder / "results.parquet")
    return {
        metric_key(
            f"{r.split}/{r.metric}" + (f"@{r.k}" if r.k else "") + ("" if r.stratum == "all" else f"/{r.stratum}")
        ): float(r.value)
        for r in results.itertuples()
    }


def _histories(folder: Path) -> list[tuple[str, float, int]]:
    from recx.runs.collection import epochs

    frame = epochs(folder)
    columns = [column for column in frame.columns if column not in ("epoch", "time")]
    return [
        (metric_key(column), float(row[column]), int(row["epoch"]))
        for _, row in frame.iterrows()
        for column in columns
        if row[column] == row[column]
    ]


def _completed_at(folder: Path) -> str:
    from recx.runs.store import COMPLETE

    stamp = (folder / COMPLETE).stat().st_mtime
    return datetime.fromtimestamp(stamp, timezone.utc).isoformat(timespec="microseconds")


def _artifacts_beside(uri: str) -> str | None:
    """A local SQLite store keeps a new experiment's artifacts in mlartifacts/ beside its database (MLflow's own
    default, ./mlruns, would be wherever recx was started); a server keeps its own default."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts").as_uri()


class _Store:
    """One MLflow experiment of one tracking store."""

    def __init__(self, tracking: Tracking, experiment: str, home: Path):
        _quiet_mlflow()
        from mlflow import MlflowClient

        uri = store_uri(tracking, home)
        if not (tracking.uri or os.environ.get("MLFLOW_TRACKING_URI")):
            home.mkdir(parents=True, exist_ok=True)
        artifacts = _artifacts_beside(uri)
        self.client = MlflowClient(uri)
        found = self.client.get_experiment_by_name(experiment)
        self.experiment = found.experiment_id if found else self.client.create_experiment(experiment, artifacts)

    def logged(self, run_id: str, completed: str) -> bool:
        query = f"tags.`recx.run_id` = '{run_id}' and tags.`recx.completed` = '{completed}'"
        return bool(self.client.search_runs([self.experiment], filter_string=query, max_results=1))

    def log(self, run: TrackedRun) -> None:
        from mlflow.entities import Metric, Param

        from recx.runs.store import read_config

        config = read_config(run.folder)
        run_id, completed = run.folder.name, _completed_at(run.folder)
        if self.logged(run_id, completed):
            return
        tags = {
            "recx.run_id": run_id,
            "recx.completed": completed,
            "recx.folder": str(run.folder.resolve()),
            **{f"recx.{key}": str(value) for key, value in run.tags.items()},
        }
        created = self.client.create_run(self.experiment, run_name=run.name, tags=tags)
        now = int(time.time() * 1000)
        params = [Param(key, str(value)) for key, value in sorted(flat(config).items())]
        metrics = [Metric(key, value, now, step) for key, value, step in _histories(run.folder)]
        metrics += [Metric(key, value, now, 0) for key, value in sorted(_final_metrics(run.folder).items())]
        for start in range(0, len(params), PARAMS_BATCH):
            self.client.log_batch(created.info.run_id, params=params[start : start + PARAMS_BATCH])
        for start in range(0, len(metrics), METRICS_BATCH):
            self.client.log_batch(created.info.run_id, metrics=metrics[start : start + METRICS_BATCH])
        self.client.log_artifacts(created.info.run_id, str(run.folder))
        self.client.set_terminated(created.info.run_id)


def log_runs(tracking: Tracking | None, experiment: str, home: Path, runs: list[TrackedRun]) -> int:
    """Log the completed runs into MLflow experiment `experiment`; the number logged. Never raises: a failure is
    one warning naming what was not tracked."""
    if tracking is None or not runs:
        return 0
    done = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = _Store(tracking, experiment, home)
            for run in runs:
                store.log(run)
                done += 1
    except Exception as error:  # tracking never fails a run: mlflow and its stores raise many types
        warn(
            f"tracking to MLflow failed after {done} of {len(runs)} runs ({_first_line(error)}); the runs "
            "themselves are complete and unchanged"
        )
    return done
