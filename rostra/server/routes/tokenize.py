"""vLLM's /tokenize and /detokenize."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError

from rostra.errors import InvalidRequest
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.tokenize import DetokenizeRequest, TokenizeRequest
from rostra.server.context import server_context
from rostra.server.request_body import param_from_location, parse_body
from rostra.serving.validation import check_model

router = APIRouter()


@router.post("/tokenize")
async def tokenize(request: Request):
    context, engine = server_context(request), server_context(request).engine
    body = await parse_body(request, TokenizeRequest)
    if body.model:
        check_model(body.model, context.served_names())
    if body.messages is not None:
        try:
            chat_body = ChatCompletionRequest.model_validate(
                {"model": context.served_names()[0], "messages": body.messages,
                 "add_generation_prompt": body.add_generation_prompt})
        except ValidationError as exc:  # a bad role or content: the client's mistake, named
            first = exc.errors(include_url=False)[0]
            param = param_from_location(tuple(first["loc"]))
            raise InvalidRequest(f"{param or 'messages'}: {first['msg']}", param=param) from None
        # As a chat request would be: the same rendering, the same plain-text special tokens.
        tokens = await (await context.chat.render(chat_body)).tokenize(engine)
    elif body.prompt is not None:
        tokens = await engine.tokenize(body.prompt, add_special=body.add_special_tokens)
    else:
        raise InvalidRequest("give a prompt or messages", param="prompt")
    return {"count": len(tokens), "max_model_len": engine.model.context_length, "tokens": tokens}


@router.post("/detokenize")
async def detokenize(request: Request):
    context, engine = server_context(request), server_context(request).engine
    body = await parse_body(request, DetokenizeRequest)
    if body.model:
        check_model(body.model, context.served_names())
    if any(not 0 <= t < engine.vocab_size for t in body.tokens):
        raise InvalidRequest("token id outside the vocabulary", param="tokens")
    return {"prompt": await engine.detokenize(body.tokens)}
