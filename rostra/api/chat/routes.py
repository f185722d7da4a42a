"""Chat Completions' route: the body parsed, its `file` parts read, and served by the model's ChatService."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.http.caller import tenant_of
from rostra.http.generation_endpoint import serve_generation
from rostra.http.request_body import parse_body
from rostra.protocol.chat import ChatCompletionRequest
from rostra.serving.chat import chat_keep_alive
from rostra.api.chat.files import has_file_parts, with_files_read

router = APIRouter()


async def create_chat_completion(request: Request) -> Response:
    body = await parse_body(request, ChatCompletionRequest)
    if has_file_parts(body):  # `file` parts: read into text parts (uploaded files are the asking key's)
        body = await with_files_read(body, request.app.state.batches, tenant_of(request))
    return await serve_generation(request, lambda model: model.chat, body, keep_alive=chat_keep_alive)


# A plain Starlette route, not FastAPI's: these endpoints read and validate their bodies themselves, so
# FastAPI's dependency solving and per-request exit stacks would be cost for nothing on the hottest path
# (a gateway's whole work per request is ~1 ms). Errors still reach the app's handlers (error_handlers.py).
router.add_route("/v1/chat/completions", create_chat_completion, methods=["POST"])
