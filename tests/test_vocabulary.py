"""One word per concept: "runner" is a training loop's epoch for a kind of model (recx.training.runners, a model's
`runner`), "kernel" a compiled routine of recx.kernels; the retired words stay out of the code."""

from __future__ import annotations

import re
from pathlib import Path

import recx

PACKAGE = Path(recx.__file__).parent
RETIRED = re.compile(r"training[ _]kind|EpochRunner|trainer_note|\bthe trainer\b", re.IGNORECASE)


def test_the_retired_words_are_gone_from_the_code():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RETIRED.search(line)
    ]
    assert not found, found
