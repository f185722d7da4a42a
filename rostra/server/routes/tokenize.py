"""vLLM's /tokenize and /detokenize (of the model the request names; without one, the first model)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from rostra.errors import InvalidRequest
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED
from rostra.http.request_body import param_from_location, parse_body
from rostra.models.bundle import ModelBundle
from rostra.protocol.chat import ChatCompletionRequest
from rostra.serving.chat_turn import chat_turn
from rostra.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from rostra.serving.validation import check_model

router = APIRouter()


@router.post("/tokenize")
async def tokenize(request: Request):
    body = await parse_body(request, TokenizeRequest)
    result = await gated(request, body.model, lambda model: _tokenized(body, model))
    return Response(status_code=CLIENT_CLOSED) if result is None else result


async def _tokenized(body: TokenizeRequest, model: ModelBundle) -> TokenizeResponse:
    engine = model.engine
    if body.model:
        check_model(body.model, model.served_names())
    if body.messages is not None:
        try:
            chat_body = ChatCompletionRequest.model_validate(
                {"model": model.served_names()[0], "messages": body.messages,
                 "add_generation_prompt": body.add_generation_prompt})
        except ValidationError as exc:  # a bad role or content: the client's mistake, named
            first = exc.errors(include_url=False)[0]
            param = param_from_location(tuple(first["loc"]))
            raise InvalidRequest(f"{param or 'messages'}: {first['msg']}", param=param) from None
        # As a chat request would be: the same rendering, the same plain-text special tokens.
        tokens = await (await model.chat.render(chat_turn(chat_body))).tokenize(model.chat.tokenizer)
    elif body.prompt is not None:
        tokens = await engine.tokenize(body.prompt, add_special=body.add_special_tokens)
    else:
        raise InvalidRequest("give a prompt or messages", param="prompt")
    return TokenizeResponse(count=len(tokens), max_model_len=engine.model.context_length, tokens=tokens)


@router.post("/detokenize")
async def detokenize(request: Request):
    body = await parse_body(request, DetokenizeRequest)
    result = await gated(request, body.model, lambda model: _detokenized(body, model))
    return Response(status_code=CLIENT_CLOSED) if result is None else result


async def _detokenized(body: DetokenizeRequest, model: ModelBundle) -> DetokenizeResponse:
    engine = model.engine
    if body.model:
        check_model(body.model, model.served_names())
    if any(not 0 <= t < engine.vocab_size for t in body.tokens):
        raise InvalidRequest("token id outside the vocabulary", param="tokens")
    return DetokenizeResponse(prompt=await engine.detokenize(body.tokens))
