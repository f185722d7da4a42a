"""Files as input on every API (rostra/file_text.py), through the official SDKs, with a small PDF made here
(tests/pdfs.py): Chat `file` parts by file_id and file_data, Responses `input_file` PDFs, Messages `document`
blocks (base64 PDF, text, content, url); each refusal naming its part. The scripted engine echoes what it reads
where no line matches: the model's view of the message, to the letter."""

from __future__ import annotations

import base64

import anthropic
import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from harness import BASE_URL, MODEL, served
from pdfs import text_pdf

REPORT = text_pdf("Quarterly report\nRevenue rose (a lot).", "Page two: costs fell.")
REPORT_TEXT = "Quarterly report\nRevenue rose (a lot).\n\nPage two: costs fell."


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    with served(tmp_path_factory.mktemp("file-inputs"), [], api_keys=["key-a", "key-b"]) as client:
        yield client


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
                          ({"type": "url", "url": "http://127.0.0.1:9/report.pdf"},
                           "messages[0].content[0].source.url"),
                          ({"type": "file", "file_id": "file-x"}, "messages[0].content[0].source")):
        with pytest.raises(anthropic.BadRequestError) as refused:
            read_by_claude(client, {"type": "document", "source": source})
        # Anthropic's envelope has no `param`: it leads the message (api/messages/errors.py)
        assert refused.value.body["error"]["message"].startswith(f"{param}: "), (source, refused.value.body)
    assert read_by_claude(client, {"type": "text", "text": "still serving"})
