"""The server's Responses and Conversations services, as a route of this API reaches them: the composition root
built them into the server's service set (rostra/server/app.py), which the HTTP layer holds without naming them."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from rostra.api.responses.conversations import ConversationsService
from rostra.api.responses.service import ResponsesService
from rostra.http.context import server_context


def responses_of(request: HTTPConnection) -> ResponsesService:
    return server_context(request).services.get(ResponsesService)


def conversations_of(request: HTTPConnection) -> ConversationsService:
    return server_context(request).services.get(ConversationsService)
