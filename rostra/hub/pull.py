"""A Hub reference -> its files on disk: the repository listed (one API call: its commit and every file with its
size and SHA-256), the files chosen (choice.py), each one not in the cache yet downloaded (download.py).

Offline (HF_HUB_OFFLINE=1), or when the Hub cannot be reached, the cache alone answers: the snapshot `refs/main`
last pointed at, as huggingface_hub itself falls back.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from rostra.hub import cache
from rostra.hub.choice import ChoiceError, ModelFiles, RemoteFile, choose
from rostra.hub.download import fetch
from rostra.hub.errors import HubError, RepositoryNotFound
from rostra.hub.progress import ConsoleProgress, DownloadState, track
from rostra.hub.reference import HubReference

log = logging.getLogger(__name__)


class Unreachable(HubError):
    """The Hub did not answer (no network, a refused connection, a timeout)."""


@dataclass(frozen=True)
class PulledModel:
    reference: HubReference
    files: ModelFiles
    commit: str
    model_path: Path  # the first part of a split model: llama.cpp opens the rest beside it
    projector_path: Path | None
    generation_config_path: Path | None  # the repository's recommended sampling, if it has one
    downloaded: int  # bytes transferred by this pull (0: all were in the cache)


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def pull(reference: HubReference, progress: ConsoleProgress | None = None) -> PulledModel:
    """The model's files, downloaded where missing; HubError (one line) when they cannot be had."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return _from_cache(reference, "HF_HUB_OFFLINE is set")
    try:
        commit, listed = list_repository(reference.repo)
    except Unreachable as exc:
        return _from_cache(reference, str(exc))
    chosen = choose(reference.repo, listed, reference.quant)
    log.info("%s: %s (%s%s)", reference.repo, chosen.quant, ", ".join(file.path for file in chosen.parts),
             f", projector {chosen.projector.path}" if chosen.projector else "")
    state = DownloadState(0, chosen.size)
    track(reference.label, state)
    try:
        downloaded = sum(_ensure(reference.repo, commit, file, progress or ConsoleProgress(), state)
                         for file in chosen.files)
    finally:
        track(reference.label, None)
    cache.write_ref(reference.repo, commit)
    return _pulled(reference, chosen, commit, downloaded)


def _pulled(reference: HubReference, chosen: ModelFiles, commit: str, downloaded: int) -> PulledModel:
    paths = {file.path: cache.snapshot_path(reference.repo, commit, file.path) for file in chosen.files}
    for path in paths.values():
        cache.mark_used(path)
    projector = paths[chosen.projector.path] if chosen.projector else None
    config = paths[chosen.generation_config.path] if chosen.generation_config else None
    return PulledModel(reference, chosen, commit, paths[chosen.parts[0].path], projector, config, downloaded)


def _from_cache(reference: HubReference, why: str) -> PulledModel:
    commit = cache.cached_commit(reference.repo)
    files = cache.cached_files(reference.repo, commit) if commit else []
    if not files:
        raise HubError(f"{why}, and {reference.label} is not downloaded (run `rostra pull {reference.label}` "
                       "with a network)")
    try:
        chosen = choose(reference.repo, files, reference.quant)
    except ChoiceError as exc:
        raise HubError(f"{why}; of what is downloaded: {exc}") from None
    log.info("%s: using the downloaded %s (%s)", reference.repo, chosen.quant, why)
    return _pulled(reference, chosen, commit or "", 0)


def list_repository(repo: str) -> tuple[str, list[RemoteFile]]:
    """The commit of `main` and the repository's files, from the Hub's API (huggingface_hub's client)."""
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, HFValidationError, OfflineModeIsEnabled,
                                        RepositoryNotFoundError)

    where = endpoint()
    try:
        info = HfApi().model_info(repo, revision="main", files_metadata=True)
    except GatedRepoError:
        raise HubError(f"{repo} is gated: accept its conditions at {where}/{repo} and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise RepositoryNotFound(f"no repository {repo} on {where} (a private one needs HF_TOKEN)") from None
    except HFValidationError as exc:
        raise HubError(f"{repo!r} is not a repository name: {exc}") from None
    except HfHubHTTPError as exc:
        raise HubError(f"{where} answered {_status(exc)} for {repo}") from None
    except (httpx2.TransportError, OfflineModeIsEnabled) as exc:
        raise Unreachable(f"no network: cannot reach {where} ({exc or type(exc).__name__})") from None
    files = [RemoteFile(sibling.rfilename, int((sibling.lfs.size if sibling.lfs else sibling.size) or 0),
                        sibling.lfs.sha256 if sibling.lfs else None, sibling.blob_id)
             for sibling in info.siblings or [] if _safe_path(sibling.rfilename)]
    if not info.sha or not re.fullmatch(r"[0-9a-f]{40}", info.sha):  # it names a folder of the cache
        raise HubError(f"{where} gave no commit for {repo}")
    return info.sha, files


def _safe_path(path: str) -> bool:
    """A file's path stays inside its snapshot folder (what an endpoint lists becomes a path on this disk)."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts and "\\" not in path


def _status(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return str(getattr(response, "status_code", "an error"))


def _ensure(repo: str, commit: str, file: RemoteFile, progress: ConsoleProgress, state: DownloadState) -> int:
    """The file in the snapshot, downloaded if its blob is not in the cache; the bytes transferred."""
    import httpx2
    from filelock import FileLock
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import build_hf_headers

    if cache.snapshot_path(repo, commit, file.path).is_file():
        state.done += file.size
        return 0
    blob = cache.blob_path(repo, file.cache_key)
    lock = cache.lock_path(repo, file.cache_key)
    lock.parent.mkdir(parents=True, exist_ok=True)
    url = f"{endpoint()}/{repo}/resolve/{commit}/{quote(file.path)}"
    received = 0
    with FileLock(str(lock)):  # a second pull of the same file waits, then finds the blob
        if not blob.is_file():
            try:
                received = fetch(url, build_hf_headers(), blob, file.size, file.sha256,
                                 lambda done: _counted(progress.start(f"{repo} {file.path}", file.size, done),
                                                       state, done), git_blob_id=file.blob_id)
            except HfHubHTTPError as exc:
                raise HubError(f"{endpoint()} answered {_status(exc)} for {repo} {file.path}") from None
            except httpx2.TransportError as exc:
                raise HubError(f"download of {repo} {file.path} broke off ({exc or type(exc).__name__}); run the "
                               "command again to resume") from None
            finally:
                progress.finish()
        else:  # the bytes of another file already in the cache
            state.done += file.size
    cache.link_snapshot(repo, commit, file.path, blob)
    return received


def _counted(shown: Callable[[int], None], state: DownloadState, done: int) -> Callable[[int], None]:
    """The progress callback that also counts into `state` (GET /v1/models shows it)."""
    state.done += done

    def update(size: int) -> None:
        state.done += size
        shown(size)

    return update


def resolve_model(model: str | None) -> PulledModel | None:
    """For `rostra serve MODEL`: the pulled model when MODEL is a Hub reference (not an existing path)."""
    from rostra.hub.reference import hub_reference

    reference = hub_reference(model)
    if reference is None:
        return None
    try:
        return pull(reference)
    except RepositoryNotFound as exc:  # perhaps a mistyped path rather than a repository
        raise RepositoryNotFound(f"{model}: no such file, and {exc}") from None
