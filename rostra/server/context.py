"""What every route reaches: the engine, the settings, the store and the services built on them.

The composition root (app.py) builds one ServerContext per app and keeps it in `app.state.rostra`;
routes get it with `server_context(request)`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from starlette.requests import Request

from rostra.api.messages.service import MessagesService
from rostra.api.responses.conversations import ConversationsService
from rostra.api.responses.service import ResponsesService
from rostra.api.embeddings.service import EmbeddingsService
from rostra.config import Settings
from rostra.engines.base import Engine
from rostra.generation_defaults import GenerationDefaults
from rostra.prompt.chat_template import ChatTemplate
from rostra.server.admission import Admission
from rostra.server.metrics import Metrics
from rostra.serving.chat import ChatService
from rostra.serving.completions import CompletionService
from rostra.store.base import ResponseStore


@dataclass
class ServerContext:
    engine: Engine
    settings: Settings
    store: ResponseStore
    template: ChatTemplate
    chat: ChatService
    completions: CompletionService
    responses: ResponsesService
    conversations: ConversationsService
    admission: Admission
    metrics: Metrics
    # The names the API accepts: those given, else the engine's (a gateway's change as upstreams come and go).
    served_names: Callable[[], list[str]]
    # What a request that leaves sampling fields out gets (--generation-config, --override-generation-config).
    generation_defaults: GenerationDefaults
    messages: MessagesService  # Anthropic's Messages API, over `chat`
    embeddings: EmbeddingsService
    started: int = field(default_factory=lambda: int(time.time()))


def server_context(request: Request) -> ServerContext:
    return request.app.state.rostra
