"""Shell completion of recx's values (Typer/Click completion; `recx --install-completion` sets it up).

Commands and options complete from the command line's own definition; these callbacks add the values: registered
names from the stored catalogue (recx.shell.catalog), prepared datasets under the data root, experiments of the
sweep's experiments file, presets and known downloads. Nothing here imports torch, pandas or a registry.
"""

from __future__ import annotations

from pathlib import Path

import typer

from recx.shell import catalog


def _starting(names, incomplete: str) -> list[str]:
    return [name for name in names if name.startswith(incomplete)]


def registered(kind: str):
    """Completion of the registered names of one catalogue kind (samplers, losses, models, formats)."""

    def complete(incomplete: str) -> list[str]:
        return _starting(catalog.stored_names(kind), incomplete)

    return complete


def choices(*values: str):
    def complete(incomplete: str) -> list[str]:
        return _starting(values, incomplete)

    return complete


def datasets(ctx: typer.Context, incomplete: str) -> list[str]:
    """Prepared datasets: folders with a card.json under --data-root (as typed so far), else $RECX_DATA or ./data."""
    from recx.data.root import default_data_root

    root = Path(ctx.params.get("data_root") or default_data_root())
    try:
        found = sorted(folder.name for folder in root.iterdir() if (folder / "card.json").is_file())
    except OSError:
        return []
    return _starting(found, incomplete)


def downloadable(ctx: typer.Context, incomplete: str) -> list[str]:
    """`recx prepare NAME`: the known downloads, then the datasets already prepared (to --force one)."""
    from recx.data.presets import dataset_names

    return list(dict.fromkeys(_starting(dataset_names(), incomplete) + datasets(ctx, incomplete)))


def presets(incomplete: str) -> list[str]:
    import yaml

    from recx.data.presets import PRESETS_FILE

    return _starting(sorted(yaml.safe_load(PRESETS_FILE.read_text())["presets"]), incomplete)


def _experiments_file(ctx: typer.Context) -> Path:
    """The sweep's experiments file: parsed (`ctx.params`), else the first YAML file among the words left unparsed
    (completing `-e`, the line ends in an option without its value), else ./experiments.yaml."""
    if ctx.params.get("experiments_file"):
        return Path(ctx.params["experiments_file"])
    return next(
        (Path(word) for word in ctx.args if word.endswith((".yaml", ".yml")) and Path(word).is_file()),
        Path("experiments.yaml"),
    )


def experiments(ctx: typer.Context, incomplete: str) -> list[str]:
    """`recx sweep FILE -e NAME`: the experiments of FILE."""
    import yaml

    try:
        found = (yaml.safe_load(_experiments_file(ctx).read_text()) or {}).get("experiments") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return []
    return _starting([str(name) for name in found], incomplete)


def list_kinds(incomplete: str) -> list[str]:
    return _starting(catalog.KINDS + ("versions",), incomplete)
