"""The HTTP routes, one module per API; each module's `router` is included by the composition root (app.py)."""

from rostra.playground.routes import router as playground_router
from rostra.server.routes import admin, completions, conversations, models, ops, responses, tokenize

ROUTERS = [ops.router, models.router, completions.router, responses.router, conversations.router, tokenize.router,
           admin.router, playground_router]
