"""Encrypted reasoning for clients that store nothing (`store: false` with
`include: ["reasoning.encrypted_content"]`).

A reasoning item then carries `encrypted_content`: its text sealed with AES-256-GCM (authenticated:
a changed byte is refused, not decrypted to garbage) under a key only this server holds. The client
sends the item back in a later `input`; rostra opens it and the model sees its earlier thinking
again, though nothing was stored. The key comes from `--reasoning-key` (base64 of 32 bytes, for
several servers behind one balancer), else from DATA_DIR/reasoning.key, made on first use.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from pathlib import Path
from typing import Any

from rostra.errors import InvalidRequest

VERSION = b"\x01"  # the format's first byte: what follows is a 12-byte nonce, then AES-GCM's output
_AAD = b"rostra reasoning item"
KEY_FILE = "reasoning.key"


def decode_key(text: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except binascii.Error as exc:
        raise ValueError("--reasoning-key: not base64") from exc
    if len(key) != 32:
        raise ValueError(f"--reasoning-key: expected 32 bytes (base64), got {len(key)}")
    return key


class ReasoningSealer:
    def __init__(self, key: bytes | None = None, key_dir: Path | None = None):
        self._key = key
        self._key_dir = key_dir

    def key(self) -> bytes:
        """The given key, else the data directory's (made, readable by this user only, on first use)."""
        if self._key is None:
            if self._key_dir is None:
                raise RuntimeError("no reasoning key and no data directory to keep one in")
            path = self._key_dir / KEY_FILE
            if not path.exists():
                self._key_dir.mkdir(parents=True, exist_ok=True)
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as file:
                        file.write(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")
                except FileExistsError:  # another process made it first: use that one
                    pass
            self._key = decode_key(path.read_text())
        return self._key

    def seal(self, text: str) -> str:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self.key()).encrypt(nonce, json.dumps({"text": text}).encode(), _AAD)
        return base64.b64encode(VERSION + nonce + sealed).decode()

    def open(self, token: str, param: str) -> str:
        """The text sealed in `token`; a 400 for anything this server did not seal."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            raw = base64.b64decode(token, validate=True)
            if raw[:1] != VERSION or len(raw) < 1 + 12 + 16:
                raise ValueError("unknown format")
            plain = AESGCM(self.key()).decrypt(raw[1:13], raw[13:], _AAD)
            text = json.loads(plain)["text"]
            if not isinstance(text, str):  # (what this server seals is always text)
                raise TypeError("the sealed text is not a string")
            return text
        except (binascii.Error, ValueError, InvalidTag, KeyError, TypeError) as exc:
            raise InvalidRequest("encrypted_content could not be decrypted: it was not made by this server "
                                 "(or its key changed), or it was altered", param=param) from exc


def reasoning_text(item: dict[str, Any], sealer: ReasoningSealer, param: str) -> str:
    """What a reasoning input item says: its sealed text, else its content, else its summary."""
    if item.get("encrypted_content"):
        return sealer.open(item["encrypted_content"], f"{param}.encrypted_content")
    for field in ("content", "summary"):
        parts = item.get(field) or []
        if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                                  for p in parts):
            raise InvalidRequest(f"reasoning {field} must be a list of text parts", param=f"{param}.{field}")
        if parts:
            return "".join(part["text"] for part in parts)
    return ""


def opened(items: list[dict[str, Any]], sealer: ReasoningSealer, param: str | None = None) -> list[dict[str, Any]]:
    """The items with each reasoning item's text in `content` (what the chat template reads); `param` names
    where they came from in errors (default: the request's input)."""
    out = []
    for index, item in enumerate(items):
        if item.get("type") == "reasoning":
            text = reasoning_text(item, sealer, param or f"input[{index}]")
            item = {**item, "content": [{"type": "reasoning_text", "text": text}]}
        elif item.get("type") == "compaction":  # a summary this server sealed (Responses compaction)
            where = f"{param or f'input[{index}]'}.encrypted_content"
            item = {**item, "summary_text": sealer.open(item["encrypted_content"], where)}
        out.append(item)
    return out
