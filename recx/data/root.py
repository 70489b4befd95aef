"""Where prepared datasets live: $RECX_DATA, else ./data (a module of its own: shell completion reads it cheaply)."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_root() -> Path:
    return Path(os.environ.get("RECX_DATA", "data"))
