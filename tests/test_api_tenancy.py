"""Tenancy: stored responses and conversations belong to the API key that made them. Another key gets a 404 on
every call that names one (as for an id that does not exist), its listing shows only its own, and nothing it sends
can read or extend them (previous_response_id, conversation, item_reference); admin keys see all;
--shared-store shares them; a server without keys is one tenant. Through the openai SDK over the app."""

from __future__ import annotations

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError

from harness import MODEL, InProcessServer
from wire import check_error

SCRIPT = [{"match": "^hello", "output": "Hello there."}, {"match": "", "output": "Something else."}]
KEYS = {"api_keys": ["key-a", "key-b"], "admin_keys": ["the-admin"]}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def sdk(server: InProcessServer, key: str) -> AsyncOpenAI:
    transport = httpx.ASGITransport(app=server.app)
    return AsyncOpenAI(base_url="http://rostra/v1", api_key=key, max_retries=0,
                       http_client=httpx.AsyncClient(transport=transport, base_url="http://rostra"))


async def a_stored_response_and_conversation(client: AsyncOpenAI) -> tuple:
    conversation = await client.conversations.create(items=[{"type": "message", "role": "user", "content": "hi"}])
    first = await client.responses.create(model=MODEL, input="hello")
    return first, conversation


async def not_found(call) -> None:
    with pytest.raises(NotFoundError) as caught:
        await call
    check_error(caught.value.response, 404)


@pytest.mark.anyio
async def test_another_key_finds_nothing_of_a_keys_responses(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **KEYS) as server:
        a, b = sdk(server, "key-a"), sdk(server, "key-b")
        first, _ = await a_stored_response_and_conversation(a)
        await not_found(b.responses.retrieve(first.id))
        await not_found(b.responses.input_items.list(first.id))
        await not_found(b.responses.cancel(first.id))
        await not_found(b.responses.delete(first.id))
        await not_found(b.responses.create(model=MODEL, input="again", previous_response_id=first.id))
        await not_found(b.responses.input_tokens.count(model=MODEL, input="again", previous_response_id=first.id))
        await not_found(b.responses.compact(model=MODEL, previous_response_id=first.id))
        followed = await server.client.get(f"/v1/responses/{first.id}?stream=true",
                                           headers={"authorization": "Bearer key-b"})
        assert followed.status_code == 404
        with pytest.raises(BadRequestError):  # an item of A's response, referenced by B: unknown
            await b.responses.create(model=MODEL, input=[{"type": "item_reference", "id": first.output[0].id}])
        # Nothing of it changed for its own key, which still reads, continues and deletes it.
        assert (await a.responses.retrieve(first.id)).output_text == "Hello there."
        assert len((await a.responses.input_items.list(first.id)).data) == 1
        second = await a.responses.create(model=MODEL, input="again", previous_response_id=first.id)
        assert second.previous_response_id == first.id
        assert (await a.responses.input_tokens.count(model=MODEL, input="again",
                                                     previous_response_id=first.id)).input_tokens > 0
        referenced = await a.responses.create(model=MODEL, input=[{"type": "item_reference",
                                                                   "id": first.output[0].id}])
        assert referenced.status == "completed"
        with pytest.raises(BadRequestError):  # its own finished response: "not running" (400), not a 404
            await a.responses.cancel(first.id)
        await a.responses.delete(first.id)
        await not_found(a.responses.retrieve(first.id))


@pytest.mark.anyio
async def test_another_key_finds_nothing_of_a_keys_conversations(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **KEYS) as server:
        a, b = sdk(server, "key-a"), sdk(server, "key-b")
        _, conversation = await a_stored_response_and_conversation(a)
        item = (await a.conversations.items.list(conversation.id)).data[0]
        await not_found(b.conversations.retrieve(conversation.id))
        await not_found(b.conversations.update(conversation.id, metadata={"by": "b"}))
        await not_found(b.conversations.items.list(conversation.id))
        await not_found(b.conversations.items.retrieve(item.id, conversation_id=conversation.id))
        await not_found(b.conversations.items.create(conversation.id, items=[
            {"type": "message", "role": "user", "content": "injected"}]))
        await not_found(b.conversations.items.delete(item.id, conversation_id=conversation.id))
        await not_found(b.responses.create(model=MODEL, input="hello", conversation=conversation.id))
        await not_found(b.responses.input_tokens.count(model=MODEL, input="hello", conversation=conversation.id))
        await not_found(b.conversations.delete(conversation.id))
        mine = await b.conversations.create()
        listed = {key: sorted(row["id"] for row in (await server.client.get(
            "/v1/conversations", headers={"authorization": f"Bearer {key}"})).json()["data"])
            for key in ("key-a", "key-b", "the-admin")}
        assert listed == {"key-a": [conversation.id], "key-b": [mine.id],
                          "the-admin": sorted([mine.id, conversation.id])}
        # A's conversation is as A left it, and goes on for A.
        assert (await a.conversations.retrieve(conversation.id)).metadata == {}
        await a.responses.create(model=MODEL, input="hello", conversation=conversation.id)
        assert len((await a.conversations.items.list(conversation.id)).data) == 3


@pytest.mark.anyio
async def test_admin_keys_see_every_keys_and_shared_store_shares(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **KEYS) as server:
        first, conversation = await a_stored_response_and_conversation(sdk(server, "key-a"))
        admin = sdk(server, "the-admin")
        assert (await admin.responses.retrieve(first.id)).id == first.id
        assert (await admin.conversations.retrieve(conversation.id)).id == conversation.id
        continued = await admin.responses.create(model=MODEL, input="again", previous_response_id=first.id)
        await not_found(sdk(server, "key-a").responses.retrieve(continued.id))  # the admin's own
        with pytest.raises(Exception) as caught:  # a key that is neither is refused, as always
            await sdk(server, "key-c").responses.retrieve(first.id)
        assert caught.value.status_code == 401
    (tmp_path / "shared").mkdir()
    async with InProcessServer(tmp_path / "shared", SCRIPT, shared_store=True, **KEYS) as server:
        first, conversation = await a_stored_response_and_conversation(sdk(server, "key-a"))
        b = sdk(server, "key-b")
        assert (await b.responses.retrieve(first.id)).id == first.id
        assert (await b.responses.create(model=MODEL, input="again", previous_response_id=first.id)).status \
            == "completed"
        assert (await b.conversations.retrieve(conversation.id)).id == conversation.id


@pytest.mark.anyio
async def test_without_keys_everything_is_one_tenant_and_stays_readable_once_keys_come(tmp_path):
    """Rows stored by a server without keys have no tenant: shared, so every key reads them after keys are set."""
    async with InProcessServer(tmp_path, SCRIPT) as server:
        first, conversation = await a_stored_response_and_conversation(sdk(server, "anything"))
        assert (await sdk(server, "other").responses.retrieve(first.id)).id == first.id
    async with InProcessServer(tmp_path, SCRIPT, **KEYS) as server:
        for key in ("key-a", "key-b"):
            assert (await sdk(server, key).responses.retrieve(first.id)).id == first.id
            assert (await sdk(server, key).conversations.retrieve(conversation.id)).id == conversation.id


def test_two_keys_on_a_real_server(tmp_path):
    """The same over real sockets: `rostra serve --api-key A --api-key B`, the unmodified openai SDK."""
    from openai import OpenAI

    from harness import write_script
    from servers import RunningServer

    server = RunningServer(["--engine", "scripted", "--script", str(write_script(tmp_path, SCRIPT)),
                            "--api-key", "key-a", "--api-key", "key-b"], data_dir=str(tmp_path / "data"))
    try:
        a, b = (OpenAI(base_url=server.v1, api_key=key, max_retries=0) for key in ("key-a", "key-b"))
        created = a.responses.create(model=MODEL, input="hello", background=True)
        conversation = a.conversations.create()
        for call in (lambda: b.responses.retrieve(created.id), lambda: b.responses.cancel(created.id),
                     lambda: b.conversations.retrieve(conversation.id),
                     lambda: b.responses.create(model=MODEL, input="hi", previous_response_id=created.id)):
            with pytest.raises(NotFoundError):
                call()
        assert a.responses.retrieve(created.id).id == created.id
        assert a.conversations.retrieve(conversation.id).id == conversation.id
    finally:
        server.stop()
