"""Who owns what is stored: the API key that made it.

A stored response or conversation keeps the fingerprint of the key that created it (`tenant`: a SHA-256 of the
key, never the key itself), and a request sees only its own key's rows. Rows with no tenant were made by a server
that took no key (or before rostra kept tenants): they are shared, every key sees them. Admin keys, and every key
under `--shared-store`, see all rows; a server without `--api-key` is one tenant that sees all.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

# Keeps a fingerprint from being a plain hash of the key that some other system might also store.
_DOMAIN = b"rostra-tenant\x00"


def fingerprint(key: bytes) -> str:
    """The stored name of an API key's tenant."""
    return "sha256:" + hashlib.sha256(_DOMAIN + key).hexdigest()


@dataclass(frozen=True)
class Tenant:
    """Who asks: `key`, the fingerprint stored as the tenant of what it creates (None: a server without keys);
    `sees_all`, whether it reads every tenant's rows (admin keys, --shared-store, a server without keys)."""

    key: str | None = None
    sees_all: bool = True

    def sql_params(self) -> tuple[bool, str | None]:
        """The parameters of a visibility condition `(? OR tenant IS NULL OR tenant = ?)`."""
        return self.sees_all, self.key


# The one tenant of a server without keys, and what internal callers (recovery, maintenance) act as.
EVERYONE = Tenant()
