"""MATLAB .mat files whose `data` key holds a users x items sparse matrix (the FastVAE papers' datasets).

scipy is imported by the reader, not with the module: the format registry imports every format to list them, and
scipy.io took 0.16-0.39 s of a `recx prepare` of another format.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recx.core.errors import RecxError
from recx.data.formats.registry import FORMATS
from recx.data.raw import RawInteractions


@FORMATS.register("mat")
def read_mat(source: Path, **_) -> RawInteractions:
    """Rows are users and columns items; ids are the row and column numbers, entries are ratings."""
    import scipy.io
    import scipy.sparse

    try:
        content = scipy.io.loadmat(source)
    except Exception as exc:  # scipy raises several types for a non-.mat file
        raise RecxError(f"{source}: not a readable .mat file ({exc})") from None
    if "data" not in content:
        raise RecxError(f"{source}: no 'data' key (found: {', '.join(k for k in content if not k.startswith('__'))})")
    matrix = scipy.sparse.coo_matrix(content["data"])
    matrix.sum_duplicates()
    return RawInteractions(matrix.row.astype(np.int64), matrix.col.astype(np.int64), matrix.data.astype(np.float32))
