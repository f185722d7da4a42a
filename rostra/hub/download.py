"""One file from the Hub into its blob, resumable and checked.

rostra keeps its own partial file (BLOB.rostra-partial): a download killed in any process continues where it
stopped, asking for the rest with `Range: bytes=N-` (huggingface_hub 2.x starts again from byte 0 in a new
process). The whole file is hashed (the bytes already on disk first) and compared with the SHA-256 the Hub lists
for it (an LFS file's oid, also its ETag): only a file whose hash matches becomes the blob, so nothing
half-written or corrupted is ever served.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Callable

from rostra.hub.cache import PARTIAL_SUFFIX
from rostra.hub.errors import HubError

CHUNK = 1 << 20
Progress = Callable[[int], None]  # bytes just written
Start = Callable[[int], Progress]  # called once, with the bytes already on disk


class ChecksumMismatch(HubError):
    pass


def fetch(url: str, headers: dict[str, str], blob: Path, size: int, sha256: str | None,
          start: Start, git_blob_id: str | None = None) -> int:
    """Download `url` into `blob` (its hash checked: the SHA-256 of an LFS file, else the git blob id of a small
    file kept in git, such as a generation_config.json); returns the bytes transferred now."""
    partial = blob.with_name(blob.name + PARTIAL_SUFFIX)
    blob.parent.mkdir(parents=True, exist_ok=True)
    done = partial.stat().st_size if partial.exists() else 0
    if done > size:  # not a prefix of this file: start again
        partial.unlink()
        done = 0
    free = shutil.disk_usage(blob.parent).free
    if size - done > free:
        raise HubError(f"not enough disk space for {blob.name[:12]}...: {size - done:,} bytes needed, "
                       f"{free:,} free in {blob.parent}")
    hasher = hashlib.sha256()
    if done:
        _hash_file(partial, hasher)
    progress = start(done)
    received = 0
    if done < size:
        received, hasher = _receive(url, headers, partial, done, size, hasher, progress)
    written = partial.stat().st_size
    if written != size:
        raise HubError(f"{url}: got {written:,} bytes of {size:,}; run the command again to resume")
    if sha256 is not None and hasher.hexdigest() != sha256.lower():
        partial.unlink()
        raise ChecksumMismatch(f"{url}: SHA-256 {hasher.hexdigest()} is not the Hub's {sha256}; the download "
                               "was discarded (run the command again)")
    if sha256 is None and git_blob_id is not None and _git_blob_id(partial, size) != git_blob_id.lower():
        partial.unlink()
        raise ChecksumMismatch(f"{url}: its git blob id is not the Hub's {git_blob_id}; the download was "
                               "discarded (run the command again)")
    os.replace(partial, blob)
    return received


def _git_blob_id(path: Path, size: int) -> str:
    """git's id of a file's bytes: the SHA-1 of `blob SIZE\0` and the bytes (what the Hub lists as `blobId`)."""
    hasher = hashlib.sha1(b"blob %d\0" % size)
    _hash_file(path, hasher)
    return hasher.hexdigest()


def _hash_file(path: Path, hasher: "hashlib._Hash") -> None:
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            hasher.update(chunk)


def _receive(url: str, headers: dict[str, str], partial: Path, done: int, size: int,
             hasher: "hashlib._Hash", progress: Progress) -> tuple[int, "hashlib._Hash"]:
    """GET the rest of the file (from byte `done`) and append it to `partial`, hashing as it comes."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    asked = {**headers, **({"Range": f"bytes={done}-"} if done else {})}
    received = 0
    with get_session().stream("GET", url, headers=asked, follow_redirects=True, timeout=60) as response:
        hf_raise_for_status(response)
        if done and response.status_code != 206:  # the server sent the whole file: take it from the start
            hasher, done = hashlib.sha256(), 0
        with partial.open("r+b" if done else "wb") as target:
            target.seek(done)
            target.truncate()
            try:
                for chunk in response.iter_bytes():  # as it arrives: a kill loses nothing received
                    target.write(chunk)
                    target.flush()  # what arrived is on disk: a killed download resumes from it
                    hasher.update(chunk)
                    received += len(chunk)
                    progress(len(chunk))
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise HubError(f"disk full writing {partial} ({done + received:,} of {size:,} bytes kept; "
                                   "free some space and run the command again to resume)") from None
                raise
    return received, hasher
