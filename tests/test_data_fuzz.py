"""Arbitrary bytes into every raw-format reader: each either parses or raises RecxError, never anything else."""
from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recx.data.formats import FORMATS
from recx.data.formats.lines import ReadReport
from recx.errors import RecxError

FILES = {"movielens": "ratings.dat", "netflix": "combined_data_1.txt", "amazon-ratings": "r.csv",
         "amazon-reviews": "r.json", "yelp": "yelp_academic_dataset_review.json",
         "gowalla-checkins": "loc-gowalla_totalCheckins.txt"}
SEEDS = [b"1::2::3::4\n", b"1:\n5,3,2005-09-06\n", b"A,B,5.0,1\n", b'{"reviewerID":"a","asin":"b","overall":1,"unixReviewTime":2}\n',
         b'{"user_id":"a","business_id":"b","stars":1,"date":"2016-03-09 00:00:00"}\n', b"0\t2010-10-19T23:55:27Z\t1\t2\t3\n"]
payloads = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(SEEDS + [b"\x1f\x8b\x08\x00", b"\n", b"\r\n", b"::", b",", b"\t", b":", b"{", b"\xff", b"-1", b"9" * 30]),
             max_size=12).map(b"".join),
)


@pytest.mark.parametrize("fmt", sorted(FILES))
@pytest.mark.parametrize("skip", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=payloads, compressed=st.booleans())
def test_reader_parses_or_raises_recx_error(fmt, skip, data, compressed):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / FILES[fmt]
        path.write_bytes(gzip.compress(data) if compressed else data)
        try:
            raw = FORMATS.get(fmt)(path, skip_bad_lines=skip, report=ReadReport())
        except RecxError:
            return
        assert len(raw) == raw.item.shape[0]
