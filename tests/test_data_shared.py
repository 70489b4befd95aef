"""The real LightGCN Gowalla split in ../shared/data (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recx.data.prepare import PrepareOptions, prepare

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "gowalla" / "train.txt").exists(), reason="shared Gowalla data absent")
def test_gowalla_lightgcn(tmp_path):
    out = prepare("gowalla", PrepareOptions(format="lightgcn", source=SHARED / "gowalla"), tmp_path)
    card = json.loads((out / "card.json").read_text())
    assert (card["n_users"], card["n_items"]) == (29_858, 40_981)
    assert card["counts"] == {"train": 719_081, "valid": 91_047, "test": 217_242}
