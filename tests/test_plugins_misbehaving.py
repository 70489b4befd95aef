"""Plugins that misbehave (issue 46, item 4): a sampler whose draws break the contract (a wrong shape, item ids
outside the catalogue, NaN log q) is refused at the first step naming the plugin, the sampler and what was wrong,
where it ended in an internal error deep in the step, an IndexError, or "the loss became nan ... try a smaller lr"; a
plugin that calls sys.exit at import no longer ends recx with exit 0 and no output; a registered name must be a name."""

from __future__ import annotations

import pytest

from tests.test_plugins import recx

FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--quiet", "--device", "cpu"]

BAD_SAMPLER = """
from dataclasses import dataclass
import torch
from recx import Negatives, Sampler, register_sampler

@dataclass
class Args:
    pass

@register_sampler("bad")
class Bad(Sampler):
    Args = Args

    def sample(self, batch):
        b, n, items = batch.users.numel(), self.n_negatives, self.dataset.n_items
        ids = torch.randint(0, items, (b, n), generator=self.generator)
        log_q = torch.full((b, n), -float(torch.log(torch.tensor(float(items)))))
        positive = torch.full((b,), float(log_q[0, 0]))
        {change}
        return Negatives(ids, log_q, positive)
"""

CASES = {
    "shape": ("ids = ids[:, :, None]", "returned items of shape [256, 5, 1] and dtype torch.int64; expected integer"),
    "ids": ("ids = ids + items", "returned item ids 100..199, outside the catalogue (ids 0..99)"),
    "nan": ("log_q[0, 0] = float('nan')", "returned 1 log_q values that are not finite (e.g. nan)"),
    "log_q shape": ("log_q = log_q[:, :2]", "returned log_q of shape [256, 2] and dtype torch.float32; expected"),
    "type": ("return (ids, log_q)", "returned tuple; expected recx.Negatives(items, log_q, positive_log_q)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plugin_samplers_bad_draw_is_refused_at_the_first_step_naming_it(
    tiny_root, tmp_path, case, recx_cli, isolated_plugins
):
    change, expected = CASES[case]
    plugin = tmp_path / "bad.py"
    plugin.write_text(BAD_SAMPLER.replace("{change}", change))
    run = tmp_path / "run"
    result = recx_cli(
        "--plugin", plugin, "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST,
        "--loss", "bce", "--sampler", "bad", "--n-negatives", "5",
    )  # fmt: skip
    assert result.code == 1, result.err
    message = " ".join(result.err.split())
    assert f"error: sampler 'bad' of plugin {plugin} (recx_plugin_bad): its sample() {expected}" in message, message
    assert "checked at the first step" in message
    assert "internal error" not in message and "Traceback" not in message and "smaller lr" not in message
    assert not run.exists()  # the run this command created is not kept


def test_a_plugin_sampler_that_keeps_the_contract_trains(tiny_root, tmp_path, recx_cli, isolated_plugins):
    plugin = tmp_path / "good.py"
    plugin.write_text(BAD_SAMPLER.replace("{change}", "pass"))
    result = recx_cli(
        "--plugin", plugin, "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", tmp_path / "run",
        *FAST, "--loss", "bce", "--sampler", "bad", "--n-negatives", "5",
    )  # fmt: skip
    assert result.code == 0, result.err


@pytest.mark.parametrize("code, shown", [(0, "0"), (3, "3"), ("bye", "'bye'")])
def test_a_plugin_that_exits_at_import_is_reported(tmp_path, code, shown, recx_cli, isolated_plugins):
    plugin = tmp_path / "leaving.py"
    plugin.write_text(f"import sys\nsys.exit({code!r})\n")
    result = recx_cli("--plugin", plugin, "list", "samplers")
    assert result.code == 1 and "Traceback" not in result.err
    assert (
        f"error: plugin {plugin} called sys.exit({shown}) while it was imported; a plugin's module should only define "
        "and register its classes"
    ) in " ".join(result.err.split())


def test_a_plugin_that_exits_at_import_is_reported_from_a_fresh_process(tmp_path):
    plugin = tmp_path / "leaving.py"
    plugin.write_text("import sys\nsys.exit(0)\n")
    result = recx("--plugin", plugin, "list", "samplers")
    assert result.returncode == 1 and "called sys.exit(0) while it was imported" in result.stderr


@pytest.mark.parametrize("name", ["../evil/x", "a/b", "..", "", "two words", "é"])
def test_a_registered_name_must_be_a_name(tmp_path, name, recx_cli, isolated_plugins):
    plugin = tmp_path / "evil.py"
    plugin.write_text(
        "from dataclasses import dataclass\nfrom recx import Sampler, register_sampler\n\n"
        f"@register_sampler({name!r})\nclass Evil(Sampler):\n    @dataclass\n    class Args:\n        pass\n"
    )
    result = recx_cli("--plugin", plugin, "list", "samplers")
    assert result.code == 1 and "Traceback" not in result.err
    message = " ".join(result.err.split())
    assert f"plugin {plugin} (recx_plugin_evil) registers the sampler name {name!r}: a name is letters, digits" in (
        message
    ), message
