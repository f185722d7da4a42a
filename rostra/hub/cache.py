"""huggingface_hub's cache layout, written and read by rostra, so a file pulled here is the one every Hugging Face
tool finds (and the other way round): under HF_HUB_CACHE (default HF_HOME/hub, ~/.cache/huggingface/hub),

    models--OWNER--NAME/blobs/SHA256            the file's bytes, named by their hash (never rewritten in place)
    models--OWNER--NAME/snapshots/COMMIT/PATH   a relative link to its blob
    models--OWNER--NAME/refs/main               the commit `main` was when last listed

rostra's own partial download sits beside the blob as SHA256.rostra-partial until its hash is checked.
"Last used" is the blob's access time, set when a model is pulled or served (mounts with noatime leave it alone).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rostra.hub.choice import RemoteFile, is_projector, quant_of

PARTIAL_SUFFIX = ".rostra-partial"


def hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def repo_folder(repo: str) -> Path:
    return hub_cache() / ("models--" + repo.replace("/", "--"))


def blob_path(repo: str, key: str) -> Path:
    return repo_folder(repo) / "blobs" / key


def lock_path(repo: str, key: str) -> Path:
    """Where huggingface_hub keeps its lock for a blob: two processes never write one file at once."""
    return hub_cache() / ".locks" / repo_folder(repo).name / (key + ".lock")


def snapshot_path(repo: str, commit: str, path: str) -> Path:
    return repo_folder(repo) / "snapshots" / commit / path


def link_snapshot(repo: str, commit: str, path: str, blob: Path) -> Path:
    """The snapshot entry for `path` at `commit`, pointing at `blob` (replaced atomically if it was there)."""
    link = snapshot_path(repo, commit, path)
    link.parent.mkdir(parents=True, exist_ok=True)
    staging = link.with_name(link.name + ".rostra-link")
    staging.unlink(missing_ok=True)
    staging.symlink_to(os.path.relpath(blob, link.parent))
    os.replace(staging, link)
    return link


def write_ref(repo: str, commit: str, revision: str = "main") -> None:
    ref = repo_folder(repo) / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def cached_commit(repo: str, revision: str = "main") -> str | None:
    ref = repo_folder(repo) / "refs" / revision
    return ref.read_text().strip() if ref.is_file() else None


def cached_files(repo: str, commit: str) -> list[RemoteFile]:
    """The complete files of a snapshot (a link whose blob is gone is not one)."""
    root = repo_folder(repo) / "snapshots" / commit
    files = []
    for entry in sorted(root.rglob("*")) if root.is_dir() else []:
        if entry.is_file():  # follows the link: a dangling one is not a file
            blob = entry.resolve()
            sha256 = blob.name if len(blob.name) == 64 else None
            files.append(RemoteFile(entry.relative_to(root).as_posix(), blob.stat().st_size, sha256, blob.name))
    return files


def mark_used(path: Path) -> None:
    """Set the blob's access time to now: `rostra ls`'s "last used"."""
    blob = path.resolve()
    try:
        os.utime(blob, (time.time(), blob.stat().st_mtime))
    except OSError:  # a read-only cache still serves
        pass


@dataclass(frozen=True)
class CachedFile:
    repo: str
    path: str  # in the repository
    quant: str
    size: int
    last_used: float  # seconds since the epoch
    link: Path


def cached_models() -> list[CachedFile]:
    """Every GGUF in the cache (projectors included), one entry per repository file, newest snapshot's first."""
    found: dict[tuple[str, str], CachedFile] = {}
    for folder in sorted(hub_cache().glob("models--*--*")):
        repo = folder.name.removeprefix("models--").replace("--", "/", 1)
        snapshots = sorted((folder / "snapshots").glob("*"), key=lambda s: s.stat().st_mtime, reverse=True)
        for snapshot in snapshots:
            for link in sorted(snapshot.rglob("*.gguf")):
                path = link.relative_to(snapshot).as_posix()
                if not link.is_file() or (repo, path) in found:
                    continue
                stat = link.stat()
                quant = "mmproj" if is_projector(path) else quant_of(path)
                found[repo, path] = CachedFile(repo, path, quant, stat.st_size, stat.st_atime, link)
    return list(found.values())


def remove(repo: str, quant: str | None) -> list[CachedFile]:
    """Delete a repository's files (all of them, or one quantization's): their links, and each blob no other link
    still needs. Returns what was removed (nothing: it was not there)."""
    files = [file for file in cached_models() if file.repo == repo]
    if quant is None:
        folder = repo_folder(repo)
        if folder.is_dir() and files:
            shutil.rmtree(folder)
        return files
    models = [file for file in files if file.quant != "mmproj"]
    # `:Q4_K_M` is that quantization; a part of a name (`:Q4_K`) is every one it is in, as the listing shows them
    chosen = ([file for file in models if file.quant == quant.upper()] or
              [file for file in models if quant.lower() in file.path.lower()])
    blobs = {file.link.resolve() for file in chosen}
    for file in chosen:
        for link in (repo_folder(repo) / "snapshots").glob(f"*/{file.path}"):
            link.unlink()
    still_linked = {link.resolve() for link in (repo_folder(repo) / "snapshots").rglob("*") if link.is_symlink()}
    for blob in blobs - still_linked:
        blob.unlink(missing_ok=True)
    if chosen and not any(file.quant != "mmproj" for file in cached_models() if file.repo == repo):
        shutil.rmtree(repo_folder(repo))  # only a projector left: nothing servable remains
    return chosen
