"""What the golden tests of the official code's training loops share: the golden lists as float64 tensors, the loops'
tolerances, and each epoch's tables held against the official code's."""

from __future__ import annotations

import torch

LOOP_RTOL, LOOP_ATOL = 1e-6, 1e-9


def f64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def assert_epoch_tables(records: list[dict], official_epochs: list[dict], names: tuple[str, ...]) -> None:
    """As many epochs as the official run, and each epoch's tables of `names` (those its official epoch holds)
    equal to the official code's within the loop tolerances, the epoch and table named on failure."""
    assert len(records) == len(official_epochs)
    for epoch, (record, expected) in enumerate(zip(records, official_epochs, strict=True), start=1):
        for name in names:
            if name in expected:
                torch.testing.assert_close(
                    record[name],
                    f64(expected[name]),
                    rtol=LOOP_RTOL,
                    atol=LOOP_ATOL,
                    msg=lambda m, name=name, epoch=epoch: f"epoch {epoch} {name}: {m}",
                )
