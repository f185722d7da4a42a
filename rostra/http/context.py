"""What every route reaches: the settings, the store, the models, admission, metrics and the APIs' services.

The composition root (rostra/server/app.py) builds one ServerContext per app and keeps it in `app.state.rostra`;
routes get it with `server_context(request)`. What belongs to one model (its engine, template, parsers,
defaults, its services) is that model's bundle, reached through a lease from `models` (rostra/models/). The
server-wide services of an API (Responses, Conversations) are in `services`, found by their class: this package
is below the APIs, so it holds them without naming them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from rostra.config import Settings
from rostra.http.admission import Admission
from rostra.http.metrics import Metrics
from rostra.http.usage_recorder import UsageRecorder
from rostra.models.manager import ModelManager
from rostra.service_set import ServiceSet
from rostra.store.base import ResponseStore


@dataclass
class ServerContext:
    settings: Settings
    store: ResponseStore
    models: ModelManager
    admission: Admission
    metrics: Metrics
    services: ServiceSet  # e.g. `services.get(ResponsesService)`, over the chat of each request's model
    usage: UsageRecorder  # every model turn's tokens per API key (rostra/http/usage_recorder.py)
    started: int = field(default_factory=lambda: int(time.time()))


def server_context(request: HTTPConnection) -> ServerContext:
    context: ServerContext = request.app.state.rostra
    return context
