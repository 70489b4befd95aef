"""Downloads from a local HTTP server on 127.0.0.1: fetch + extract, resume with Range, checksum, truncation."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile

import pytest

from recx.core.errors import RecxError
from recx.data import prepare as prepare_module
from recx.data.download import fetch_dataset
from recx.data.prepare import PrepareOptions, prepare

RATINGS = "".join(f"{u}::{i}::{(u + i) % 5 + 1}::{978300000 + u * 7 + i}\n" for u in range(1, 30) for i in range(1, 12))


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ml-tiny/ratings.dat", RATINGS)
        archive.writestr("ml-tiny/README.txt", "tiny")
    return buffer.getvalue()


class Server:
    """Serves `files` (path -> bytes); honours Range; `cut` stops a response after that many bytes."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.cut, self.ranges = files, None, []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                data = owner.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start = 0
                if "Range" in self.headers:
                    start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
                    owner.ranges.append(start)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                self.wfile.write(body if owner.cut is None else body[: owner.cut])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def spec(url: str, sha256: str | None) -> dict:
    return {"format": "movielens", "url": url, "sha256": sha256, "file": "ml-tiny/ratings.dat"}


def test_download_extract_and_prepare(tmp_path, monkeypatch):
    data = zip_bytes()
    with Server({"/ml-tiny.zip": data}) as server:
        pinned = spec(server.url("/ml-tiny.zip"), hashlib.sha256(data).hexdigest())
        monkeypatch.setattr(prepare_module, "dataset_spec", lambda name: pinned if name == "mltiny" else None)
        monkeypatch.setenv("RECX_CACHE", str(tmp_path / "cache"))
        out = prepare("mltiny", PrepareOptions(kcore=2), tmp_path / "data")
    card = json.loads((out / "card.json").read_text())
    assert card["download"]["sha256"] == hashlib.sha256(data).hexdigest() and card["download"]["sha256_pinned"]
    assert card["format"] == "movielens" and card["rows"]["read"] == RATINGS.count("\n")
    assert (tmp_path / "cache" / "mltiny" / "ml-tiny.zip").exists()
    fetched = fetch_dataset("mltiny", pinned, tmp_path / "cache")  # cached: no server needed
    assert fetched.path.read_text() == RATINGS


def test_resume_with_range(tmp_path):
    data = zip_bytes()
    with Server({"/a.zip": data}) as server:
        server.cut = len(data) // 3
        with pytest.raises(RecxError, match="run the same command again to resume"):
            fetch_dataset("a", spec(server.url("/a.zip"), None), tmp_path)
        part = tmp_path / "a" / "a.zip.part"
        assert part.stat().st_size == len(data) // 3
        server.cut = None
        fetched = fetch_dataset("a", spec(server.url("/a.zip"), None), tmp_path)
        assert server.ranges == [len(data) // 3]
    assert fetched.sha256 == hashlib.sha256(data).hexdigest() and not fetched.pinned
    assert fetched.path.read_text() == RATINGS and not part.exists()


def test_checksum_mismatch(tmp_path):
    with Server({"/a.zip": zip_bytes()}) as server:
        with pytest.raises(RecxError, match="checksum mismatch"):
            fetch_dataset("a", spec(server.url("/a.zip"), "0" * 64), tmp_path)
    assert not (tmp_path / "a" / "a.zip").exists()
    assert not any(p.name.startswith("a.zip") for p in (tmp_path / "a").iterdir())


def test_truncated_archive(tmp_path):
    data = zip_bytes()
    with Server({"/a.zip": data[: len(data) - 40]}) as server:
        with pytest.raises(RecxError, match="truncated or corrupt zip archive"):
            fetch_dataset("a", spec(server.url("/a.zip"), None), tmp_path)
    assert [p.name for p in (tmp_path / "a").iterdir()] == []


def test_http_error(tmp_path):
    with Server({}) as server:
        with pytest.raises(RecxError, match="HTTP 404"):
            fetch_dataset("a", spec(server.url("/missing.zip"), None), tmp_path)


def test_gz_download_is_read_compressed(tmp_path, monkeypatch):
    import gzip

    data = gzip.compress(b"0\t2010-10-19T23:55:27Z\t30.2\t-97.7\t22847\n1\t2010-10-19T23:55:27Z\t30.2\t-97.7\t22847\n")
    with Server({"/loc.txt.gz": data}) as server:
        gz_spec = {"format": "gowalla-checkins", "url": server.url("/loc.txt.gz"), "sha256": None, "file": "loc.txt.gz"}
        monkeypatch.setattr(prepare_module, "dataset_spec", lambda name: gz_spec)
        monkeypatch.setenv("RECX_CACHE", str(tmp_path / "cache"))
        out = prepare("gw", PrepareOptions(ratios="50/50"), tmp_path / "data")
    assert json.loads((out / "card.json").read_text())["n_interactions"] == 2
