"""The stored catalogue (recx/catalog.json) that `--help` and completion read equals the live registries."""

import re

from recx.shell import catalog


def test_stored_catalog_matches_the_registries():
    """Fails when a sampler, loss, model or format is added, renamed or given other arguments or defaults (or a
    run config default changes, or a run setting's declaration in recx.config.schema: its help, range, choices) without
    `python -m recx.shell.catalog --write` (make catalog)."""
    assert catalog.STORED.read_text() == catalog.render(catalog.build()), (
        "recx/catalog.json is out of date: run `python -m recx.shell.catalog --write` (make catalog)"
    )


def test_check_mode_reports_up_to_date(capsys):
    assert catalog.main([]) == 0 and "up to date" in capsys.readouterr().out


def test_help_names_come_from_the_stored_catalog(recx_cli):
    text = re.sub(r"[│\s]+", " ", recx_cli("train", "--help").out)
    for name in catalog.stored_names("samplers") + catalog.stored_names("losses"):
        assert name in text
    assert f"(default: {catalog.stored_default('sampler')})" in text
