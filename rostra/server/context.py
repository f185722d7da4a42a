"""What every route reaches: the settings, the store, the models and the services built on them.

The composition root (app.py) builds one ServerContext per app and keeps it in `app.state.rostra`;
routes get it with `server_context(request)`. What belongs to one model (its engine, template, parsers,
defaults, Chat/Completions/Messages/Embeddings services) is that model's bundle, reached through a lease
from `models` (rostra/server/models/); the Responses API, Conversations and the store are the server's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from starlette.requests import Request

from rostra.api.responses.conversations import ConversationsService
from rostra.api.responses.service import ResponsesService
from rostra.config import Settings
from rostra.server.admission import Admission
from rostra.server.metrics import Metrics
from rostra.server.models.manager import ModelManager
from rostra.store.base import ResponseStore


@dataclass
class ServerContext:
    settings: Settings
    store: ResponseStore
    models: ModelManager
    responses: ResponsesService  # over the chat of each request's model
    conversations: ConversationsService
    admission: Admission
    metrics: Metrics
    started: int = field(default_factory=lambda: int(time.time()))


def server_context(request: Request) -> ServerContext:
    return request.app.state.rostra
