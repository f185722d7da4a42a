"""Files as input on every API (rostra/file_text.py), through the official SDKs, with a small PDF made here
(tests/pdfs.py): Chat `file` parts by file_id and file_data, Responses `input_file` PDFs (by file_url too, from a
local HTTP server this server is told to trust), Messages `document` blocks (base64 PDF, text, content, url, file);
each refusal naming its part. The scripted engine echoes what it reads
where no line matches: the model's view of the message, to the letter."""

from __future__ import annotations

import base64

import anthropic
import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from harness import BASE_URL, MODEL, served
from images import RecordingServer, Route
from pdfs import text_pdf
from rostra.errors import InvalidRequest
from rostra.file_fetch import fetch_file
from rostra.images.limits import ImageLimits

REPORT = text_pdf("Quarterly report\nRevenue rose (a lot).", "Page two: costs fell.")
REPORT_TEXT = "Quarterly report\nRevenue rose (a lot).\n\nPage two: costs fell."


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    # 127.0.0.1 trusted as a deployment trusts an internal file store: the files by URL below come from there.
    with served(tmp_path_factory.mktemp("file-inputs"), [], api_keys=["key-a", "key-b"],
                image_allow_hosts=["127.0.0.1"]) as client:
        yield client


@pytest.fixture(scope="module")
def file_host():
    host = RecordingServer({"/q3/report%20final.pdf": Route(body=REPORT, headers={"Content-Type": "application/pdf"}),
                            "/notes.txt": Route(body=b"Ship on Tuesday.", headers={"Content-Type": "text/plain"}),
                            "/photo.png": Route(body=b"\x89PNG....", headers={"Content-Type": "image/png"})})
    yield host
    host.close()


def openai_client(http, key: str = "key-a") -> OpenAI:
    return OpenAI(base_url=f"{BASE_URL}/v1", api_key=key, max_retries=0, http_client=http)


def pdf_data_url(data: bytes = REPORT) -> str:
    return "data:application/pdf;base64," + base64.b64encode(data).decode()


def chat(client: OpenAI, *parts: dict) -> str:
    answer = client.chat.completions.create(model=MODEL, messages=[
        {"role": "user", "content": [{"type": "text", "text": "Read this:"}, *parts]}])
    return answer.choices[0].message.content or ""


def test_chat_file_parts_by_file_id_and_file_data_are_read_as_text(http):
    client = openai_client(http)
    upload = client.files.create(file=("report.pdf", REPORT), purpose="user_data")
    assert REPORT_TEXT in chat(client, {"type": "file", "file": {"file_id": upload.id}})
    assert f'<file name="report.pdf">\n{REPORT_TEXT}\n</file>' in chat(client, {"type": "file", "file": {"file_id": upload.id}})
    inline = chat(client, {"type": "file", "file": {"file_data": pdf_data_url(), "filename": "q3.pdf"}})
    assert f'<file name="q3.pdf">\n{REPORT_TEXT}\n</file>' in inline
    notes = "data:text/plain;base64," + base64.b64encode("Ship on Tuesday.".encode()).decode()
    assert "Ship on Tuesday." in chat(client, {"type": "file", "file": {"file_data": notes, "filename": "n.txt"}})


def test_chat_file_refusals_name_the_part(http):
    client, other = openai_client(http), openai_client(http, "key-b")
    upload = client.files.create(file=("report.pdf", REPORT), purpose="user_data")
    scanned = client.files.create(file=("scan.pdf", text_pdf("")), purpose="user_data")
    with pytest.raises(NotFoundError) as missing:  # another key's file is not there for it
        chat(other, {"type": "file", "file": {"file_id": upload.id}})
    assert missing.value.body["param"] == "messages[0].content[1].file.file_id"
    for part, param in (({"type": "file", "file": {"file_data": "not base64!"}}, "messages[0].content[1].file.file_data"),
                        ({"type": "file", "file": {"file_data": pdf_data_url(b"%PDF-1.7 broken")}},
                         "messages[0].content[1].file"),
                        ({"type": "file", "file": {"file_id": scanned.id}}, "messages[0].content[1].file"),
                        ({"type": "file", "file": {}}, "messages[0].content[1].file"),
                        ({"type": "file"}, "messages[0].content[1].file")):
        with pytest.raises(BadRequestError) as refused:
            chat(client, part)
        assert refused.value.body["param"] == param, (part, refused.value.body)


def test_responses_input_file_pdf_by_file_id_is_read(http):
    client = openai_client(http)
    upload = client.files.create(file=("report.pdf", REPORT), purpose="user_data")
    response = client.responses.create(model=MODEL, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "Read this:"}, {"type": "input_file", "file_id": upload.id}]}])
    assert response.output_text == f'Read this:<file name="report.pdf">\n{REPORT_TEXT}\n</file>'
    inline = client.responses.create(model=MODEL, input=[{"role": "user", "content": [
        {"type": "input_file", "file_data": pdf_data_url(), "filename": "q3.pdf"}]}])
    assert REPORT_TEXT in inline.output_text


def messages_client(http) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=BASE_URL, api_key="key-a", max_retries=0, http_client=http)


def read_by_claude(client: anthropic.Anthropic, document: dict) -> str:
    message = client.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": [
        document, {"type": "text", "text": "Summarize."}]}])
    return "".join(block.text for block in message.content if block.type == "text")


def test_messages_document_blocks_are_read(http):
    client = messages_client(http)
    pdf = read_by_claude(client, {"type": "document", "title": "Q3", "context": "From finance.", "source": {
        "type": "base64", "media_type": "application/pdf", "data": base64.b64encode(REPORT).decode()}})
    assert f'<document title="Q3">\nFrom finance.\n{REPORT_TEXT}\n</document>' in pdf
    text = read_by_claude(client, {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                  "data": "Plain notes."},
                                   "citations": {"enabled": True}})
    assert "<document>\nPlain notes.\n</document>" in text
    content = read_by_claude(client, {"type": "document", "source": {"type": "content", "content": [
        {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}})
    assert "<document>\nfirst\nsecond\n</document>" in content
    counted = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": base64.b64encode(REPORT).decode()}}]}])
    assert counted.input_tokens > 10


def test_messages_document_refusals_name_the_source(http):
    client = messages_client(http)
    for source, param in (({"type": "base64", "media_type": "application/pdf", "data": "###"},
                           "messages[0].content[0].source.data"),
                          ({"type": "base64", "media_type": "application/pdf",
                            "data": base64.b64encode(b"%PDF-1.4 nothing").decode()}, "messages[0].content[0].source"),
                          ({"type": "url", "url": "http://10.1.2.3/report.pdf"},  # a private address: not fetched
                           "messages[0].content[0].source.url"),
                          ({"type": "url", "url": "http://127.0.0.1:9/report.pdf"},  # trusted, but nobody answers
                           "messages[0].content[0].source.url"),
                          ({"type": "file"}, "messages[0].content[0].source"),
                          ({"type": "file", "file_id": 7}, "messages[0].content[0].source.file_id")):
        with pytest.raises(anthropic.BadRequestError) as refused:
            read_by_claude(client, {"type": "document", "source": source})
        # Anthropic's envelope has no `param`: it leads the message (api/messages/errors.py)
        assert refused.value.body["error"]["message"].startswith(f"{param}: "), (source, refused.value.body)
    assert read_by_claude(client, {"type": "text", "text": "still serving"})


def test_files_by_url_are_fetched_and_read(http, file_host):
    client = openai_client(http)
    response = client.responses.create(model=MODEL, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "Read this:"},
        {"type": "input_file", "file_url": file_host.url("/q3/report%20final.pdf")}]}])
    assert response.output_text == f'Read this:<file name="report final.pdf">\n{REPORT_TEXT}\n</file>'
    document = read_by_claude(messages_client(http), {"type": "document", "title": "Notes", "source": {
        "type": "url", "url": file_host.url("/notes.txt")}})
    assert '<document title="Notes">\nShip on Tuesday.\n</document>' in document
    for url, reason in ((file_host.url("/photo.png"), "not a file"), (file_host.url("/gone.pdf"), "HTTP 404"),
                        ("http://10.1.2.3/a.pdf", "not a public address"), ("ftp://127.0.0.1/a.pdf", "http(s)")):
        with pytest.raises(BadRequestError) as refused:
            client.responses.create(model=MODEL, input=[{"role": "user", "content": [
                {"type": "input_file", "file_url": url}]}])
        assert refused.value.body["param"] == "input[0].content[0].file_url", refused.value.body
        assert reason in refused.value.body["message"], refused.value.body


def test_messages_document_file_source_is_the_callers_uploaded_file(http):
    upload = openai_client(http).files.create(file=("report.pdf", REPORT), purpose="user_data")
    document = {"type": "document", "source": {"type": "file", "file_id": upload.id}}
    assert f"<document>\n{REPORT_TEXT}\n</document>" in read_by_claude(messages_client(http), document)
    other = anthropic.Anthropic(base_url=BASE_URL, api_key="key-b", max_retries=0, http_client=http)
    with pytest.raises(anthropic.NotFoundError) as missing:  # another key's file is not there for it
        read_by_claude(other, document)
    assert missing.value.body["error"]["message"].startswith("messages[0].content[0].source.file_id: ")


@pytest.mark.anyio
async def test_a_server_that_fetches_no_urls_fetches_no_files():
    with pytest.raises(InvalidRequest) as refused:
        await fetch_file("http://127.0.0.1:9/a.pdf", "input[0].content[0].file_url", ImageLimits(fetch_urls=False))
    assert refused.value.param == "input[0].content[0].file_url" and "--no-image-urls" in str(refused.value)
