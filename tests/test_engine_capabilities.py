"""Issue 42, the engine seam by capability: an engine says what it serves in one frozen record (text generation,
vision, embedding, rerank, gateway, and text generation's switches), and a model gets the services of its
capabilities only: an embedding model has no Completions, Messages or Decisions service (its counting and
generation routes are the 400 naming what it serves), a chat model no Embeddings or Rerank service."""

from __future__ import annotations

import dataclasses

import pytest
from starlette.testclient import TestClient

from harness import BASE_URL, MODEL, InProcessServer
from rostra.api.completions.service import CompletionService
from rostra.api.decisions.service import DecisionsService
from rostra.api.embeddings.service import EmbeddingsService
from rostra.api.messages.service import MessagesService
from rostra.api.rerank.service import RerankService
from rostra.engines.base import Capabilities

TEXT_SERVICES = (CompletionService, MessagesService, DecisionsService)


def started(tmp_path, task: str) -> tuple[InProcessServer, TestClient]:
    server = InProcessServer(tmp_path, [])
    assert server.engine is not None
    server.engine.task = task  # as `--task` sets it on a real engine before the model's bundle is built
    return server, TestClient(server.app, base_url=BASE_URL)


def bundle_of(server: InProcessServer):
    (slot,) = server.app.state.rostra.models.slots
    assert slot.bundle is not None
    return slot.bundle


def test_the_capabilities_are_one_frozen_record_of_the_engines_task(tmp_path):
    server, _ = started(tmp_path, "generate")
    engine = server.engine
    text = engine.capabilities()
    assert (text.text, text.embedding, text.rerank, text.gateway) == (True, False, False, False)
    assert text.scores_prompts == engine.scores_prompts and text.vision == engine.takes_images(MODEL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        text.text = False  # type: ignore[misc]
    engine.task = "embed"
    assert engine.capabilities() == dataclasses.replace(text, text=False, embedding=True)
    engine.task = "rerank"
    assert engine.capabilities() == dataclasses.replace(text, text=False, rerank=True)
    assert isinstance(engine.capabilities(), Capabilities)


def test_a_generation_model_gets_the_text_services_and_no_embeddings(tmp_path):
    server, client = started(tmp_path, "generate")
    with client as http:
        services = bundle_of(server).services
        for kind in TEXT_SERVICES:
            assert isinstance(services.get(kind), kind)
        for kind in (EmbeddingsService, RerankService):
            with pytest.raises(LookupError):
                services.get(kind)
        refused = http.post("/v1/embeddings", json={"model": MODEL, "input": "x"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "model_not_embedding"
        refused = http.post("/v1/rerank", json={"model": MODEL, "query": "q", "documents": ["d"]})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "model_not_reranker"
        unknown = http.post("/v1/embeddings", json={"model": "nope", "input": "x"})
        assert unknown.status_code == 404, unknown.text  # an unknown name is still a 404 first


def test_an_embedding_model_gets_no_text_services(tmp_path):
    server, client = started(tmp_path, "embed")
    with client as http:
        services = bundle_of(server).services
        assert isinstance(services.get(EmbeddingsService), EmbeddingsService)
        for kind in (*TEXT_SERVICES, RerankService):
            with pytest.raises(LookupError):
                services.get(kind)
        user = [{"role": "user", "content": "hi"}]
        for path, body in (("/v1/completions", {"prompt": "hi"}), ("/v1/messages/count_tokens", {"messages": user}),
                           ("/v1/messages", {"messages": user, "max_tokens": 5}),
                           ("/v1/decisions", {"input": "x", "questions": [
                               {"type": "choice", "instructions": "Yes?", "choices": [{"value": "a"}, {"value": "b"}]}]})):
            refused = http.post(path, json={"model": MODEL, **body})
            assert refused.status_code == 400, (path, refused.text)
            assert "/v1/embeddings" in refused.json()["error"]["message"], (path, refused.text)
