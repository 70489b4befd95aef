"""A plugin's mistakes named (issue 45, section 3): a class without Args, with a malformed one, or without its
contract's method is refused when it registers, naming the plugin; an exception raised inside a plugin's method is
reported naming the plugin and the method, and the run folder is left as an interruption leaves it."""

from __future__ import annotations

import pytest

from recx.runs import store
from tests.test_plugins import FAST, recx

HEAD = "from dataclasses import dataclass\nimport torch\nfrom recx import Metric, Sampler, register_metric, register_sampler\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            '@register_sampler("noargs")\nclass NoArgs(Sampler):\n    def sample(self, batch):\n        pass\n',
            "sampler 'noargs' of plugin {plugin} (recx_plugin_bad) is refused: it has no Args: declare a dataclass",
        ),
        (
            "@dataclass\nclass Args:\n    weight: float\n\n"
            '@register_sampler("nodefault")\nclass NoDefault(Sampler):\n    Args = Args\n\n'
            "    def sample(self, batch):\n        pass\n",
            "sampler 'nodefault' of plugin {plugin} (recx_plugin_bad) is refused: its Args field 'weight' has no default",
        ),
        (
            "class Args:\n    weight = 1.0\n\n"
            '@register_sampler("plain")\nclass Plain(Sampler):\n    Args = Args\n\n'
            "    def sample(self, batch):\n        pass\n",
            "is refused: its Args (<class 'recx_plugin_bad.Args'>) is not a dataclass",
        ),
        (
            "@dataclass\nclass Args:\n    pass\n\n"
            '@register_sampler("nosample")\nclass NoSample(Sampler):\n    Args = Args\n',
            "sampler 'nosample' of plugin {plugin} (recx_plugin_bad) is refused: it does not implement sample",
        ),
        (
            '@register_metric("whole")\nclass Whole(Metric):\n    level = "catalogue"\n\n'
            "    def per_user(self, top, k):\n        return top.n_hits(k)\n",
            "metric 'whole' of plugin {plugin} (recx_plugin_bad) is refused: a catalogue-level metric must implement "
            "from_exposure",
        ),
    ],
    ids=["no-args", "no-default", "not-a-dataclass", "no-sample", "catalogue-without-from-exposure"],
)
def test_a_malformed_plugin_class_is_refused_when_it_registers(tmp_path, body, expected):
    plugin = tmp_path / "bad.py"
    plugin.write_text(HEAD + body)
    result = recx("--plugin", plugin, "list", "samplers", "--file", tmp_path / "none.yaml")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert expected.format(plugin=plugin) in " ".join(result.stderr.split()), result.stderr


EXPLODES = """
from recx import register_sampler
from recx.samplers.uniform import UniformSampler

@register_sampler("explodes")
class Explodes(UniformSampler):
    def sample(self, batch):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls > 3:
            raise ZeroDivisionError("the fourth batch")
        return super().sample(batch)
"""

BROKEN_METRIC = """
from recx import Metric, register_metric

@register_metric("broken")
class Broken(Metric):
    def per_user(self, top, k):
        raise ValueError("no value for these lists")
"""


def test_an_exception_inside_a_plugin_method_names_the_plugin_and_the_method(tiny_root, tmp_path):
    plugin = tmp_path / "explodes.py"
    plugin.write_text(EXPLODES)
    run = tmp_path / "run"
    result = recx(
        "train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, "--loss", "bpr",
        "--sampler", "explodes", "--plugin", plugin,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr and "internal error" not in result.stderr
    message = " ".join(result.stderr.split())
    assert f"error: plugin {plugin}" in message and "Explodes.sample (" in message
    assert "raised ZeroDivisionError: the fourth batch; stopped the training of run run after 0 epochs" in message
    assert "marked incomplete: the same train (or sweep) restarts it from the first epoch" in message
    assert f"the traceback is in {run / 'error.log'}" in message
    assert store.state(run) == "incomplete" and "ZeroDivisionError" in (run / "error.log").read_text()

    trained = tmp_path / "trained"
    done = recx("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", trained, *FAST)
    assert done.returncode == 0, done.stderr
    metric = tmp_path / "broken.py"
    metric.write_text(BROKEN_METRIC)
    evaluated = recx("eval", trained, "--ks", "5", "--plugin", metric)
    message = " ".join(evaluated.stderr.split())
    assert evaluated.returncode == 1 and "internal error" not in message, message
    assert f"error: plugin {metric}" in message and "Broken.per_user (" in message
    assert "raised ValueError: no value for these lists" in message
