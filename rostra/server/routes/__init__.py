"""The HTTP routes, one module per API; each module's `router` is included by the composition root (app.py).
The front ends that have a package of their own (rostra/api/<name>/) bring their router from there, and those
whose clients read an error envelope of their own register it (rostra/http/envelopes.py)."""

from typing import Callable

from rostra.http.envelopes import ErrorEnvelopes

from rostra.api.batches import routes as batches
from rostra.api.chat import routes as chat
from rostra.api.completions import routes as completions
from rostra.api.decisions import routes as decisions
from rostra.api.embeddings import routes as embeddings
from rostra.api.messages import routes as messages
from rostra.api.rerank import routes as rerank
from rostra.api.responses import routes as responses
from rostra.api.responses import transports as responses_transports
from rostra.api.usage import routes as usage
from rostra.api.vector_stores import routes as vector_stores
from rostra.playground.routes import router as playground_router
from rostra.server.routes import admin, lora, models, ops, tokenize

ROUTERS = [ops.router, models.router, chat.router, completions.router, responses.router,
           responses_transports.router, tokenize.router, admin.router, lora.router,
           messages.router, embeddings.router, rerank.router, decisions.router, batches.router, usage.router,
           vector_stores.router, playground_router]

ENVELOPES: list[Callable[[ErrorEnvelopes], None]] = [messages.register_envelope]
