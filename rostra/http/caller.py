"""Who is calling: the API key a request came with (its tenant, name and limits), for the code that runs inside the
request (the usage recorder reads it when a model turn finishes) without passing it through every call. Set by the
API key middleware for the request's task; tasks the request starts (a background response) inherit it."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from rostra.api_keys import KeyLimits
from rostra.store.tenancy import EVERYONE, Tenant


@dataclass(frozen=True)
class Caller:
    tenant: str | None  # the key's fingerprint (rostra/store/tenancy.py); None on a server without keys
    name: str | None = None
    limits: KeyLimits = KeyLimits()
    admin: bool = False  # an admin key: reads every key's usage
    batch: bool = False  # a batch line run for the key
    may_prioritize: bool = False  # under --restrict-priority, whether it may send a priority other than 0


ANONYMOUS = Caller(None)
current_caller: ContextVar[Caller] = ContextVar("rostra_caller", default=ANONYMOUS)


def tenant_of(request: HTTPConnection) -> Tenant:
    """Whose key made the request (the key middleware says; without keys there is one tenant): every API that keeps
    objects per key (Responses, Files and Batches, vector stores, Chat's `file` parts) asks it here."""
    tenant = request.scope.get("state", {}).get("tenant", EVERYONE)
    return tenant if isinstance(tenant, Tenant) else EVERYONE
