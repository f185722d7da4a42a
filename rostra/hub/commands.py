"""`rostra pull`, `rostra ls`, `rostra rm`: the Hub cache from the command line. Errors are one line and exit 1."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from rostra.hub.errors import HubError
from rostra.hub.progress import size_text
from rostra.hub.reference import HubReference


def add_commands(commands: Any) -> None:
    pull = commands.add_parser("pull", help="download a GGUF model from the Hugging Face Hub",
                               description="Download OWNER/NAME[:QUANT] (and its projector) into the Hugging Face "
                                           "cache; prints the model file's path.")
    pull.add_argument("reference", metavar="OWNER/NAME[:QUANT]")
    pull.set_defaults(hub_command=_pull)
    listing = commands.add_parser("ls", help="list the GGUF models downloaded from the Hub",
                                  description="List the GGUF files in the Hugging Face cache.")
    listing.set_defaults(hub_command=_ls)
    remove = commands.add_parser("rm", help="delete a downloaded model",
                                 description="Delete OWNER/NAME (every file) or OWNER/NAME:QUANT (one "
                                             "quantization) from the Hugging Face cache.")
    remove.add_argument("reference", metavar="OWNER/NAME[:QUANT]")
    remove.set_defaults(hub_command=_rm)


def run(args: argparse.Namespace) -> None:
    logging.basicConfig(level="WARNING", format="%(message)s", stream=sys.stderr)
    logging.getLogger("rostra").setLevel("INFO")  # which file was chosen; not every HTTP request
    try:
        args.hub_command(args)
    except HubError as exc:
        raise SystemExit(f"rostra {args.command}: {exc}") from None
    except KeyboardInterrupt:
        raise SystemExit(f"rostra {args.command}: interrupted (a download resumes where it stopped)") from None
    except OSError as exc:  # the cache folder unwritable, a full disk outside the download itself
        raise SystemExit(f"rostra {args.command}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) \
            from None


def _reference(text: str) -> HubReference:
    reference = HubReference.parse(text)
    if reference is None:
        raise HubError(f"{text!r} is not OWNER/NAME[:QUANT]")
    return reference


def _pull(args: argparse.Namespace) -> None:
    from rostra.hub.pull import pull

    pulled = pull(_reference(args.reference))
    what = f"{pulled.files.quant}, {size_text(pulled.files.size)}"
    fetched = f"{size_text(pulled.downloaded)} downloaded" if pulled.downloaded else "already downloaded"
    print(f"{pulled.reference.repo} ({what}): {fetched}", file=sys.stderr)
    if pulled.projector_path:
        print(f"projector: {pulled.projector_path}", file=sys.stderr)
    print(pulled.model_path)


def _ls(args: argparse.Namespace) -> None:
    from rostra.hub.cache import cached_models, hub_cache

    rows = [("REPOSITORY", "FILE", "QUANT", "SIZE", "LAST USED")]
    for file in cached_models():
        rows.append((file.repo, file.path, file.quant, size_text(file.size), _ago(file.last_used)))
    if len(rows) == 1:
        print(f"no models downloaded in {hub_cache()}", file=sys.stderr)
        return
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _ago(when: float) -> str:
    seconds = max(0.0, time.time() - when)
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length:
            count = int(seconds // length)
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"


def _rm(args: argparse.Namespace) -> None:
    from rostra.hub.cache import remove

    reference = _reference(args.reference)
    removed = remove(reference.repo, reference.quant)
    if not removed:
        raise HubError(f"{reference.label} is not downloaded (see `rostra ls`)")
    for file in removed:
        print(f"removed {file.repo} {file.path} ({size_text(file.size)})", file=sys.stderr)
