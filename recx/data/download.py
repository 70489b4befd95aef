"""Fetch a dataset's archive into the cache ($RECX_CACHE, default ~/.cache/recx), resume, verify, extract.

A download goes to `<name>.part` and resumes from its size with an HTTP Range request; a server that ignores the
range (status 200) restarts it. The complete file is checked against the pinned sha256 (when one is pinned) before
it is renamed into place; zip archives are extracted into a folder written under a temporary name, so an
interrupted extraction leaves nothing that looks complete. `.gz` files stay compressed (the readers stream them).
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path

from recx.core.errors import RecxError
from recx.data.dataset_folder import sha256_of

CHUNK = 1 << 20
TIMEOUT_S = 60


def cache_root() -> Path:
    return Path(os.environ.get("RECX_CACHE") or Path.home() / ".cache" / "recx")


@dataclass
class Fetched:
    """The file to read, the archive it came from, and the archive's computed sha256."""

    path: Path
    archive: Path
    url: str
    sha256: str
    pinned: bool


def _fetch(url: str, target: Path) -> None:
    """Download `url` to `target`, resuming `target.part`; an interruption keeps the part for the next attempt."""
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            status = response.status
            if have and status != 206:
                have = 0
            expected = response.headers.get("Content-Length")
            expected_total = None if expected is None else have + int(expected)
            with open(part, "ab" if have else "wb") as out:
                while block := response.read(CHUNK):
                    out.write(block)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:
            part.replace(target)
            return
        raise RecxError(f"downloading {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, HTTPException, OSError) as exc:
        kept = (
            f"to resume ({part} is kept, {part.stat().st_size:,} bytes)"
            if part.is_file()
            else "(nothing was downloaded; check the network connection)"
        )
        raise RecxError(f"downloading {url} failed ({exc}); run the same command again {kept}") from None
    size = part.stat().st_size
    if expected_total is not None and size < expected_total:
        raise RecxError(
            f"downloading {url} stopped at {size} of {expected_total} bytes; run the same command again "
            f"to resume ({part} is kept)"
        )
    part.replace(target)


def _verify(path: Path, url: str, sha256: str | None) -> str:
    actual = sha256_of(path)
    if sha256 is not None and actual != sha256.lower():
        path.unlink()
        raise RecxError(
            f"{url}: checksum mismatch (sha256 {actual}, expected {sha256}); the file was deleted, "
            "run again to download it afresh"
        )
    return actual


def _extract(archive: Path, folder: Path) -> None:
    tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with zipfile.ZipFile(archive) as handle:
            handle.extractall(tmp)
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        archive.unlink(missing_ok=True)
        raise RecxError(
            f"{archive}: truncated or corrupt zip archive ({exc}); it was deleted, run again to download it afresh"
        ) from None
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


def fetch_dataset(name: str, spec: dict, cache: Path | None = None) -> Fetched:
    """Download (or reuse) the archive of dataset `name` and return the file to read (`spec['file']`)."""
    cache = cache or cache_root()
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    url = spec["url"]
    archive = folder / url.rstrip("/").rsplit("/", 1)[-1]
    if not archive.exists():
        _fetch(url, archive)
    digest = _verify(archive, url, spec.get("sha256"))
    if archive.suffix == ".zip":
        extracted = folder / archive.stem
        if not (extracted / spec["file"]).exists():
            _extract(archive, extracted)
        path = extracted / spec["file"]
    else:
        path = folder / spec["file"]
    if not path.exists():
        raise RecxError(f"{archive}: has no {spec['file']} (the dataset spec's `file`)")
    return Fetched(path, archive, url, digest, spec.get("sha256") is not None)
