"""Files as input on the Responses API (rostra/api/responses/file_inputs.py): `input_file` by file_id or file_data read
as the file's text, `input_image` by file_id read as the image, each file the asking key's, through the openai SDK."""

from __future__ import annotations

import base64

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError

from harness import MODEL, InProcessServer
from images import encoded, pattern

# The scripted engine echoes what it reads where no line matches: the model's view of the message, to the letter.
SCRIPT: list[dict] = []
NOTES = "Ship on Tuesday.\nÜnïcode stays.\n"


def sdk(server: InProcessServer, key: str = "none") -> AsyncOpenAI:
    transport = httpx.ASGITransport(app=server.app)
    return AsyncOpenAI(base_url="http://rostra/v1", api_key=key, max_retries=0,
                       http_client=httpx.AsyncClient(transport=transport, base_url="http://rostra", timeout=60))


def ask(*parts: dict) -> list[dict]:
    return [{"role": "user", "content": [{"type": "input_text", "text": "Read this:"}, *parts]}]


@pytest.mark.anyio
async def test_an_uploaded_text_file_is_read_as_its_text(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        upload = await client.files.create(file=("notes.md", NOTES.encode()), purpose="user_data")
        response = await client.responses.create(model=MODEL, input=ask({"type": "input_file", "file_id": upload.id}))
        assert response.output_text == f'Read this:<file name="notes.md">\n{NOTES}\n</file>'
        again = await client.responses.create(model=MODEL, previous_response_id=response.id, input="and now?")
        await client.files.delete(upload.id)  # the stored input holds what the model read: deletion changes nothing
        later = await client.responses.create(model=MODEL, previous_response_id=again.id, input="still there?")
        assert later.status == "completed"


@pytest.mark.anyio
async def test_file_data_is_read_and_named_by_filename(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        data = "data:text/csv;base64," + base64.b64encode(b"a,b\n1,2\n").decode()
        response = await sdk(server).responses.create(model=MODEL, input=ask(
            {"type": "input_file", "file_data": data, "filename": "table.csv"}))
        assert response.output_text == 'Read this:<file name="table.csv">\na,b\n1,2\n\n</file>'


@pytest.mark.anyio
async def test_an_uploaded_image_is_seen_as_an_image(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        upload = await client.files.create(file=("photo.png", encoded(pattern(40, 30), "PNG")), purpose="vision")
        response = await client.responses.create(model=MODEL, input=ask({"type": "input_image", "file_id": upload.id,
                                                                          "detail": "auto"}))
        assert "[image 40x30]" in response.output_text


@pytest.mark.anyio
async def test_refusals_name_the_part(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, api_keys=["key-a", "key-b"]) as server:
        owner, other = sdk(server, "key-a"), sdk(server, "key-b")
        upload = await owner.files.create(file=("notes.md", NOTES.encode()), purpose="user_data")
        pdf = await owner.files.create(file=("paper.pdf", b"%PDF-1.7\n..."), purpose="user_data")
        binary = await owner.files.create(file=("blob.bin", b"\xff\xfe\x00\x81"), purpose="user_data")
        with pytest.raises(NotFoundError) as caught:  # another key's file is not there for it
            await other.responses.create(model=MODEL, input=ask({"type": "input_file", "file_id": upload.id}))
        assert caught.value.body["param"] == "input[0].content[1].file_id"
        for part, param in (({"type": "input_file", "file_id": pdf.id}, "input[0].content[1]"),
                            ({"type": "input_file", "file_id": binary.id}, "input[0].content[1]"),
                            ({"type": "input_image", "file_id": upload.id}, "input[0].content[1].file_id"),
                            ({"type": "input_file", "file_url": "http://10.1.2.3/a.pdf"},  # private: not fetched
                             "input[0].content[1].file_url"),
                            ({"type": "input_file", "file_data": "not base64!"}, "input[0].content[1].file_data"),
                            ({"type": "input_file"}, "input[0].content[1]")):
            with pytest.raises(BadRequestError) as refused:
                await owner.responses.create(model=MODEL, input=ask(part))
            assert refused.value.body["param"] == param, (part, refused.value.body)
        assert (await owner.responses.create(model=MODEL, input="still serving")).status == "completed"
