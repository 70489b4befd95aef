"""Which ratings count as positive interactions: all of them, or those >= / > a threshold."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from recx.core.errors import RecxError

_RULE = re.compile(r"^\s*(>=|>)\s*(-?\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True)
class RatingRule:
    """`op` is None (keep all), '>=' or '>'; a rating r is kept when `r op threshold`."""

    op: str | None = None
    threshold: float | None = None

    @staticmethod
    def parse(text: str | None) -> "RatingRule":
        """'all' (or None) keeps every rating; '>=4' or '>3.5' keeps ratings passing the comparison."""
        if text is None or str(text).strip().lower() in ("all", "binarize", "binarise"):
            return RatingRule()
        match = _RULE.match(str(text))
        if not match:
            raise RecxError(f"--rating {text!r}: expected 'all', '>=N' or '>N' (e.g. '>=4')")
        return RatingRule(match.group(1), float(match.group(2)))

    def describe(self) -> str:
        return "all" if self.op is None else f"{self.op}{self.threshold:g}"

    def keep(self, rating: np.ndarray | None, source: str) -> np.ndarray | None:
        """Boolean mask of kept rows, or None when every row is kept."""
        if self.op is None:
            return None
        if rating is None:
            raise RecxError(f"--rating {self.describe()} given but {source} has no rating column")
        return rating >= self.threshold if self.op == ">=" else rating > self.threshold
