"""The Conversations API, and responses that read and extend a conversation: through the openai SDK, bodies
checked against the spec; a conversation survives a restart of the server."""

from __future__ import annotations

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError, OpenAI
from openai.types.conversations import Conversation

from conftest import scripted
from harness import MODEL, InProcessServer
from servers import RunningServer
from spec import validate
from test_api_responses import check_response
from wire import check_error

SCRIPT = [{"match": "^quick", "output": "A quick answer."},
          {"match": "^again", "output": "Another answer."}]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def sdk(server: InProcessServer) -> AsyncOpenAI:
    """The SDK over the in-process app (no sockets)."""
    transport = httpx.ASGITransport(app=server.app)
    return AsyncOpenAI(base_url="http://rostra/v1", api_key="unused", max_retries=0,
                       http_client=httpx.AsyncClient(transport=transport, base_url="http://rostra"))


def check_conversation(body: dict) -> dict:
    validate("ConversationResource", body)
    Conversation.model_validate(body, strict=True)
    return body


def check_items(page: dict) -> list[dict]:
    validate("ConversationItemList", page)
    for item in page["data"]:
        validate("ConversationItem", item)
    return page["data"]


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": text}


@pytest.mark.anyio
async def test_conversations_and_their_items(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        created = await client.conversations.create(metadata={"topic": "demo"},
                                                    items=[message("user", "hello"), message("assistant", "hi")])
        raw = (await server.client.get(f"/v1/conversations/{created.id}")).json()
        assert check_conversation(raw) == created.model_dump(exclude_none=True) | {"metadata": {"topic": "demo"}}
        updated = await client.conversations.update(created.id, metadata={"topic": "other"})
        assert updated.metadata == {"topic": "other"}

        added = await client.conversations.items.create(created.id, items=[message("user", "more")])
        assert [item.type for item in added.data] == ["message"]
        page = (await server.client.get(f"/v1/conversations/{created.id}/items?order=asc&limit=2")).json()
        first_two = check_items(page)
        assert [item["content"][0]["text"] for item in first_two] == ["hello", "hi"] and page["has_more"]
        rest = [item async for item in client.conversations.items.list(created.id, order="asc",
                                                                          after=first_two[-1]["id"])]
        assert [item.content[0].text for item in rest] == ["more"]

        one = await client.conversations.items.retrieve(first_two[0]["id"], conversation_id=created.id)
        validate("ConversationItem", one.model_dump(exclude_none=True))
        await client.conversations.items.delete(first_two[0]["id"], conversation_id=created.id)
        with pytest.raises(NotFoundError):
            await client.conversations.items.retrieve(first_two[0]["id"], conversation_id=created.id)

        deleted = await client.conversations.delete(created.id)
        validate("DeletedConversationResource", deleted.model_dump())
        with pytest.raises(NotFoundError):
            await client.conversations.retrieve(created.id)


@pytest.mark.anyio
async def test_listing_conversations(tmp_path):
    """GET /v1/conversations, a rostra extension (the playground's sidebar): OpenAI's list shape and paging,
    each conversation as the spec and the SDK's type have it; bad paging is a 400 naming the parameter."""
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        empty = (await server.client.get("/v1/conversations")).json()
        assert empty == {"object": "list", "data": [], "has_more": False, "first_id": "", "last_id": ""}
        made = [await client.conversations.create(metadata={"title": str(n)}) for n in range(3)]
        whole = (await server.client.get("/v1/conversations", params={"order": "asc"})).json()
        assert {conversation["id"] for conversation in whole["data"]} == {c.id for c in made}
        for conversation in whole["data"]:
            check_conversation(conversation)
        assert [c["created_at"] for c in whole["data"]] == sorted(c["created_at"] for c in whole["data"])
        assert (whole["first_id"], whole["last_id"]) == (whole["data"][0]["id"], whole["data"][-1]["id"])
        first = (await server.client.get("/v1/conversations", params={"limit": 2})).json()
        rest = (await server.client.get("/v1/conversations", params={"limit": 2, "after": first["last_id"]})).json()
        assert first["has_more"] and not rest["has_more"]
        assert [c["id"] for c in first["data"] + rest["data"]] == [c["id"] for c in reversed(whole["data"])]
        await client.conversations.delete(made[0].id)
        left = (await server.client.get("/v1/conversations")).json()["data"]
        assert made[0].id not in {c["id"] for c in left} and len(left) == 2
        for params, param in [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"order": "up"}, "order"),
                              ({"after": "conv_unknown"}, "after")]:
            check_error(await server.client.get("/v1/conversations", params=params), 400, param)


@pytest.mark.anyio
async def test_bad_conversation_requests_are_4xx_in_the_envelope(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        with pytest.raises(BadRequestError) as unknown:
            await client.conversations.create(extra_body={"itemz": []})
        assert unknown.value.body["param"] == "itemz"
        with pytest.raises(BadRequestError) as bad_item:
            await client.conversations.create(items=[{"type": "message", "role": "wizard", "content": "x"}])
        assert bad_item.value.body["param"] == "items[0].role"
        with pytest.raises(BadRequestError):
            await client.conversations.create(items=[message("user", str(n)) for n in range(21)])
        with pytest.raises(NotFoundError) as missing:
            await client.responses.create(model=MODEL, input="quick", conversation="conv_missing")
        assert missing.value.body["param"] == "conversation"
        conversation = await client.conversations.create()
        with pytest.raises(BadRequestError):
            await client.responses.create(model=MODEL, input="quick", conversation=conversation.id,
                                          previous_response_id="resp_x")


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_reads_and_extends_its_conversation(tmp_path, stream):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        conversation = await client.conversations.create(items=[message("system", "Be brief.")])

        async def respond(text: str):
            if not stream:
                return await client.responses.create(model=MODEL, input=text, conversation=conversation.id)
            async with client.responses.stream(model=MODEL, input=text, conversation=conversation.id) as events:
                return await events.get_final_response()

        first = await respond("quick")
        check_response((await server.client.get(f"/v1/responses/{first.id}")).json())
        assert first.conversation.id == conversation.id and first.output_text == "A quick answer."
        second = await respond("again")
        assert second.output_text == "Another answer."
        # The second prompt held the first exchange: more input tokens for a same-length question.
        assert second.usage.input_tokens > first.usage.input_tokens + 5
        items = check_items((await server.client.get(f"/v1/conversations/{conversation.id}/items?order=asc")).json())
        texts = [(item["role"], item["content"][0]["text"]) for item in items]
        assert texts == [("system", "Be brief."), ("user", "quick"), ("assistant", "A quick answer."),
                         ("user", "again"), ("assistant", "Another answer.")]


def test_a_conversation_survives_a_restart(tmp_path):
    args = list(scripted("script.jsonl"))
    server = RunningServer(args, data_dir=str(tmp_path))
    try:
        client = OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
        conversation = client.conversations.create(metadata={"k": "v"})
        client.responses.create(model=MODEL, input="say hello", conversation=conversation.id)
    finally:
        server.stop()
    server = RunningServer(args, data_dir=str(tmp_path))
    try:
        client = OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
        assert client.conversations.retrieve(conversation.id).metadata == {"k": "v"}
        later = client.responses.create(model=MODEL, input="count to ten", conversation=conversation.id)
        assert later.output_text == "one two three four five six seven eight nine ten"
        items = list(client.conversations.items.list(conversation.id, order="asc"))
        assert [item.role for item in items] == ["user", "assistant", "user", "assistant"]
        for item in items:
            validate("ConversationItem", item.model_dump(exclude_none=True))
    finally:
        server.stop()
