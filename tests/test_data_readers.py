"""Raw-format readers on small files written in the real formats (blank lines, CRLF, duplicates, unicode ids)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from recx.core.errors import RecxError
from recx.data.formats.lines import ReadReport
from recx.data.formats.registry import FORMATS


def write(path: Path, text: str | bytes, gz: bool = False) -> Path:
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def read(fmt: str, path: Path, **options):
    report = ReadReport()
    return FORMATS.get(fmt)(path, report=report, **options), report


def ids(raw, which: str) -> list:
    values, vocab = getattr(raw, which), getattr(raw, f"{which}_vocab")
    return (values if vocab is None else vocab[values]).tolist()


def test_movielens_dat_crlf_blank_lines_and_half_stars(tmp_path):
    path = write(tmp_path / "ratings.dat", "1::122::5::838985046\r\n\r\n1::185::4.5::838983525\r\n2::122::3::868245777")
    raw, report = read("movielens", path)
    assert raw.user.tolist() == [1, 1, 2] and raw.item.tolist() == [122, 185, 122]
    assert raw.rating.tolist() == [5.0, 4.5, 3.0]
    assert raw.timestamp.tolist() == [838985046, 838983525, 868245777]
    assert report.files[0]["path"] == str(path) and len(report.files[0]["sha256"]) == 64


def test_movielens_dat_in_folder_and_gzipped(tmp_path):
    folder = tmp_path / "ml-10M100K"
    folder.mkdir()
    write(folder / "ratings.dat", "1::2::3::4\n", gz=True)
    raw, _ = read("movielens", tmp_path)
    assert raw.item.tolist() == [2]


def test_movielens_csv_header(tmp_path):
    path = write(
        tmp_path / "ratings.csv", "userId,movieId,rating,timestamp\n1,296,5.0,1147880044\n1,306,3.5,1147868817\n"
    )
    raw, _ = read("movielens", path)
    assert raw.item.tolist() == [296, 306] and raw.rating.tolist() == [5.0, 3.5]


def test_movielens_csv_wrong_header(tmp_path):
    path = write(tmp_path / "ratings.csv", "user,item\n1,2\n")
    with pytest.raises(RecxError, match=r"ratings.csv, line 1: expected the header"):
        read("movielens", path)


def test_movielens_non_numeric_id_names_the_line(tmp_path):
    path = write(tmp_path / "ratings.dat", "1::2::3::4\n\nx1::2::3::4\n1::3::3::4\n")
    with pytest.raises(RecxError, match=r"ratings.dat, line 3: expected UserID::MovieID"):
        read("movielens", path)


def test_movielens_skip_bad_lines_counts(tmp_path):
    path = write(tmp_path / "ratings.dat", "1::2::3::4\nx1::2::3::4\n1::3\n1::3::3::4\n")
    raw, report = read("movielens", path, skip_bad_lines=True)
    assert raw.item.tolist() == [2, 3]
    assert report.malformed_lines == 2 and "line 2" in report.malformed_examples[0]


def test_movielens_wrong_format_file(tmp_path):
    path = write(tmp_path / "ratings.dat", "1,2,3,4\n")
    with pytest.raises(RecxError, match="line 1"):
        read("movielens", path)


def test_empty_file(tmp_path):
    path = write(tmp_path / "ratings.dat", "\n\n")
    with pytest.raises(RecxError, match="no data lines"):
        read("movielens", path)


def test_netflix_several_files(tmp_path):
    write(
        tmp_path / "combined_data_1.txt",
        "1:\r\n1488844,3,2005-09-06\r\n822109,5,2005-05-13\r\n\r\n2:\r\n1488844,4,2005-01-01\r\n",
    )
    write(tmp_path / "combined_data_2.txt", "3:\n30878,4,2005-12-26\n4:\n")
    write(tmp_path / "movie_titles.csv", "1,2003,Dinosaur Planet\n")
    raw, report = read("netflix", tmp_path)
    assert raw.user.tolist() == [1488844, 822109, 1488844, 30878]
    assert raw.item.tolist() == [1, 1, 2, 3]
    assert raw.rating.tolist() == [3, 5, 4, 4]
    assert raw.timestamp[0] == 1125964800  # 2005-09-06 00:00 UTC
    assert [Path(f["path"]).name for f in report.files] == ["combined_data_1.txt", "combined_data_2.txt"]


def test_netflix_rating_before_movie_line(tmp_path):
    path = write(tmp_path / "combined_data_1.txt", "5,3,2005-09-06\n1:\n6,3,2005-09-06\n")
    with pytest.raises(RecxError, match="before the first 'MovieID:' line"):
        read("netflix", path)


def test_netflix_missing_date_names_the_line(tmp_path):
    path = write(tmp_path / "combined_data_1.txt", "1:\n5,3,2005-09-06\n6,3,\n")
    with pytest.raises(RecxError, match=r"line 3"):
        read("netflix", path)


def test_amazon_ratings_csv_unicode_gzip(tmp_path):
    path = write(
        tmp_path / "ratings_Books.csv.gz", "AéB,0001,5.0,1217894400\r\nA2,0002,3.0,1217894401\nA2,0001,1.0,1\n", gz=True
    )
    raw, _ = read("amazon-ratings", path)
    assert ids(raw, "user") == ["AéB", "A2", "A2"] and ids(raw, "item") == ["0001", "0002", "0001"]
    assert raw.rating.tolist() == [5.0, 3.0, 1.0]


def test_amazon_ratings_missing_column(tmp_path):
    path = write(tmp_path / "r.csv", "A,B,5.0,12\nA,C,5.0\n")
    with pytest.raises(RecxError, match=r"r.csv, line 2: expected user,item,rating,timestamp"):
        read("amazon-ratings", path)


def test_amazon_reviews_json_gz(tmp_path):
    lines = [
        '{"reviewerID": "A2SUAM1J3GNN3B", "asin": "0000013714", "overall": 5.0, "unixReviewTime": 1393545600,'
        ' "reviewText": "great", "helpful": [2, 3]}',
        "",
        '{"reviewerID": "ü", "asin": "x", "overall": 2.0, "unixReviewTime": 1}',
    ]
    path = write(tmp_path / "reviews_Books_5.json.gz", "\r\n".join(lines) + "\r\n", gz=True)
    raw, _ = read("amazon-reviews", path)
    assert ids(raw, "user") == ["A2SUAM1J3GNN3B", "ü"] and raw.timestamp.tolist() == [1393545600, 1]


def test_amazon_reviews_missing_field(tmp_path):
    path = write(
        tmp_path / "r.json",
        '{"reviewerID": "a", "asin": "x", "overall": 2.0, "unixReviewTime": 1}\n'
        '{"reviewerID": "a", "asin": "y", "unixReviewTime": 1}\n',
    )
    with pytest.raises(RecxError, match=r"r.json, line 2: .*missing 'overall'"):
        read("amazon-reviews", path)


def test_truncated_gzip(tmp_path):
    data = gzip.compress(("A,B,5.0,12\n" * 2000).encode())
    path = write(tmp_path / "r.csv.gz", data[: len(data) // 2])
    with pytest.raises(RecxError, match=r"r.csv.gz: truncated or corrupt gzip"):
        read("amazon-ratings", path)


def test_yelp_reviews(tmp_path):
    write(
        tmp_path / "yelp_academic_dataset_review.json",
        '{"review_id":"r1","user_id":"q-ü","business_id":"b1","stars":4.0,"useful":0,'
        '"text":"Good, \\"really\\"\\nfood","date":"2016-03-09 00:00:00"}\n'
        '{"review_id":"r2","user_id":"q2","business_id":"b1","stars":1,"date":"2016-03-10 12:00:00"}\n',
    )
    raw, _ = read("yelp", tmp_path)
    assert ids(raw, "user") == ["q-ü", "q2"] and raw.rating.tolist() == [4.0, 1.0]
    assert raw.timestamp.tolist() == [1457481600, 1457481600 + 86400 + 43200]


def test_gowalla_checkins(tmp_path):
    rows = [
        "0\t2010-10-19T23:55:27Z\t30.2359091167\t-97.7951395833\t22847",
        "0\t2010-10-18T22:17:43Z\t30.2691029532\t-97.7493953705\t420315",
        "0\t2010-10-17T23:42:03Z\t30.2557309927\t-97.7633857727\t22847",
        "1\t2010-10-12T00:21:28Z\t40.6438845363\t-73.7828063965\t23261",
    ]
    write(tmp_path / "loc-gowalla_totalCheckins.txt.gz", "\n".join(rows) + "\n", gz=True)
    raw, _ = read("gowalla-checkins", tmp_path)
    assert raw.user.tolist() == [0, 0, 0, 1] and raw.item.tolist() == [22847, 420315, 22847, 23261]
    assert raw.rating is None and raw.timestamp[0] == 1287532527


def test_gowalla_bad_time(tmp_path):
    path = write(tmp_path / "loc-gowalla_totalCheckins.txt", "0\tyesterday\t30.2\t-97.7\t22847\n")
    with pytest.raises(RecxError, match="line 1"):
        read("gowalla-checkins", path)


def test_block_boundaries_do_not_split_lines(tmp_path, monkeypatch):
    import recx.data.formats.lines as lines

    monkeypatch.setattr(lines, "BLOCK_BYTES", 7)
    text = "".join(f"{u}::{u % 5}::3::{u}\n" for u in range(200))
    raw, _ = read("movielens", write(tmp_path / "ratings.dat", text))
    assert np.array_equal(raw.user, np.arange(200))
