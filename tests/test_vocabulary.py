"""One word per concept (issue 47 §3): "runner" is a training loop's epoch for a kind of model (recx.training.runners,
a model's `runner`), "kernel" a compiled routine of recx.kernels; the retired words stay out of the code, and a
plugin's model written with the old attribute names still trains for one release."""

from __future__ import annotations

import re
from pathlib import Path

import recx
from recx.models.base import Model

PACKAGE = Path(recx.__file__).parent
RETIRED = re.compile(r"training[ _]kind|EpochRunner|trainer_note|\bthe trainer\b", re.IGNORECASE)


def test_the_retired_words_are_gone_from_the_code():
    """Only the one-release reading of the old attribute names (recx/models/base.py) may name them."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RETIRED.search(line) and path != PACKAGE / "models" / "base.py"
    ]
    assert not found, found


def test_a_model_with_the_old_attribute_names_keeps_its_runner():
    class Old(Model):
        training_kind = "users"
        trainer_note = "fitted elsewhere"

    class New(Model):
        runner = "alternating"

    assert (Old.runner, Old.runner_note) == ("users", "fitted elsewhere")
    assert New.runner == "alternating" and Model.runner == "interactions"
