"""Images on every API, through the real SDKs, against `rostra serve` with the scripted engine (no script: it echoes
the last message, each image shown as `[image WxH]` where it stands), and the embedded text-only model (a 400
naming the part). Image URLs are fetched by rostra only from allowed hosts: the recording server sees no hit
from a refused one."""

from __future__ import annotations

import base64
import shlex
import subprocess

import anthropic
import httpx
import pytest
from openai import OpenAI
from PIL import Image

from anthropic_wire import check_message, headers
from images import RecordingServer, Route, data_url, encoded, pattern, png_data_url
from servers import RunningServer
from test_api_responses import check_response
from wire import check, check_error, fold_chat_stream, post, stream

MODEL = "scripted"
PNG = encoded(pattern(), "PNG")


@pytest.fixture(scope="module")
def images_host():
    host = RecordingServer({"/cat.png": Route(body=PNG, headers={"Content-Type": "image/png"})})
    yield host
    host.close()


@pytest.fixture(scope="module")
def server():
    # "localhost" is trusted by name; 127.0.0.1 (the same server) is not: a request naming it is refused.
    server = RunningServer(["--engine", "scripted", "--max-model-len", "4096", "--image-allow-hosts", "localhost"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def openai_client(server) -> OpenAI:
    return OpenAI(base_url=server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def anthropic_client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="none", max_retries=0)


def picture(url: str | None = None, detail: str = "auto") -> dict:
    return {"type": "image_url", "image_url": {"url": url or png_data_url(), "detail": detail}}


# --- Chat Completions ---------------------------------------------------------------------------------------------

def test_chat_image_stands_where_it_is(openai_client, server):
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, picture(detail="high"),
                                             {"type": "text", "text": "And this?"}, picture(png_data_url(10, 7))]}]
    reply = openai_client.chat.completions.create(model=MODEL, messages=messages)
    assert reply.choices[0].message.content == "What is this?[image 24x16]And this?[image 10x7]"
    body = check("chat", post(server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": messages}).json())
    chunks = stream(server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": messages}, "chat_chunk")
    assert fold_chat_stream(chunks)[0]["content"] == body["choices"][0]["message"]["content"]
    assert body["usage"]["prompt_tokens"] > 10


@pytest.mark.parametrize("fmt, options, media_type", [("WEBP", {"lossless": True}, "image/webp"),
                                                      ("BMP", {}, "image/bmp"), ("JPEG", {}, "image/jpeg"),
                                                      ("GIF", {}, "image/gif"), ("TIFF", {}, "image/tiff")])
def test_chat_formats(openai_client, fmt, options, media_type):
    url = data_url(encoded(pattern(), fmt, **options), media_type)
    reply = openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [picture(url)]}])
    assert reply.choices[0].message.content == "[image 24x16]"


def test_chat_exif_rotated_photo_is_seen_upright(openai_client):
    exif = Image.Exif()
    exif[0x0112] = 6  # a phone photo taken upright: stored 30x20, shown 20x30
    url = data_url(encoded(pattern(30, 20), "JPEG", exif=exif.tobytes()), "image/jpeg")
    reply = openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [picture(url)]}])
    assert reply.choices[0].message.content == "[image 20x30]"


def test_chat_tool_message_holds_an_image(openai_client):
    messages = [{"role": "user", "content": "Take a screenshot"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "Here it is:"},
                                                                       picture()]}]
    reply = openai_client.chat.completions.create(model=MODEL, messages=messages)
    assert reply.choices[0].message.content == "Here it is:[image 24x16]"


def test_chat_image_url_fetched_from_an_allowed_host(openai_client, images_host):
    reply = openai_client.chat.completions.create(model=MODEL, messages=[
        {"role": "user", "content": [picture(images_host.url("/cat.png", host="localhost"))]}])
    assert reply.choices[0].message.content == "[image 24x16]"
    assert images_host.hits == ["/cat.png"]


BAD_IMAGES = [
    ("data:image/png;base64,@@@", "invalid_base64"),
    ("data:text/html;base64,PGh0bWw+", "invalid_image_format"),
    (data_url(PNG[:80]), "invalid_image"),  # truncated
    (data_url(encoded(Image.new("1", (20000, 20000)), "PNG")), "image_too_large"),  # a bomb: 44 KiB of PNG
    ("file:///etc/passwd", "invalid_image_url"),
]


@pytest.mark.parametrize("url, code", BAD_IMAGES)
def test_chat_bad_images_are_a_400_naming_the_part(server, url, code):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"},
                                         {"role": "user", "content": [{"type": "text", "text": "look"}, picture(url)]}]}
    error = check_error(post(server.base_url, "/v1/chat/completions", body), 400, "messages[1].content[1]")
    assert error["code"] == code
    assert post(server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "user", "content": "still serving"}]}).status_code == 200


def test_chat_ssrf_reaches_nothing(server, images_host):
    hits = len(images_host.hits)
    for host in ("127.0.0.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "127.1"):
        body = {"model": MODEL, "messages": [{"role": "user", "content": [picture(images_host.url("/cat.png", host))]}]}
        error = check_error(post(server.base_url, "/v1/chat/completions", body), 400, "messages[0].content[0]")
        assert error["code"] == "invalid_image_url"
    assert len(images_host.hits) == hits



@pytest.mark.parametrize("part, param", [({"type": "image_url", "image_url": {}}, "messages[0].content[1].image_url.url"),
                                         ({"type": "image_url", "image_url": {"url": 5}},
                                          "messages[0].content[1].image_url.url"),
                                         ({"type": "image_url"}, "messages[0].content[1]")])
def test_chat_malformed_image_part_is_a_400_naming_its_field(server, part, param):
    body = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, part]}]}
    check_error(post(server.base_url, "/v1/chat/completions", body), 400, param)


def test_image_detail_levels_accepted_and_others_refused(server):
    for detail in ("auto", "low", "high", "original"):
        body = {"model": MODEL, "messages": [{"role": "user", "content": [picture(detail=detail)]}]}
        assert post(server.base_url, "/v1/chat/completions", body).status_code == 200, detail
    body = {"model": MODEL, "messages": [{"role": "user", "content": [picture(detail="ultra")]}]}
    check_error(post(server.base_url, "/v1/chat/completions", body), 400, "messages[0].content[0].image_url.detail")
    image = {"type": "input_image", "image_url": png_data_url(), "detail": "ultra"}
    body = {"model": MODEL, "input": [{"role": "user", "content": [image]},
                                      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                                      {"type": "function_call_output", "call_id": "c", "output": [image]}]}
    check_error(post(server.base_url, "/v1/responses", body), 400, "input[0].content[0].detail")
    body["input"][0]["content"][0] = {**image, "detail": "original"}
    check_error(post(server.base_url, "/v1/responses", body), 400, "input[2].output[0].detail")

@pytest.mark.parametrize("role", ["system", "assistant"])
def test_chat_images_only_in_user_and_tool_messages(server, role):
    body = {"model": MODEL, "messages": [{"role": role, "content": [picture()]}, {"role": "user", "content": "hi"}]}
    check_error(post(server.base_url, "/v1/chat/completions", body), 400, "messages[0].content[0]")


def test_models_say_which_take_images(openai_client):
    [card] = openai_client.models.list().data
    assert card.model_extra["input_modalities"] == ["text", "image"]


# --- Responses ------------------------------------------------------------------------------------------------

def test_responses_input_image(openai_client, server, images_host):
    response = openai_client.responses.create(model=MODEL, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "Describe"}, {"type": "input_image", "image_url": png_data_url(), "detail": "low"}]}])
    assert response.output_text == "Describe[image 24x16]"
    hits = len(images_host.hits)
    fetched = openai_client.responses.create(model=MODEL, input=[{"role": "user", "content": [
        {"type": "input_image", "image_url": images_host.url("/cat.png", host="localhost"), "detail": "high"}]}])
    assert fetched.output_text == "[image 24x16]" and images_host.hits[hits:] == ["/cat.png"]
    check_response(response.model_dump(mode="json", exclude_unset=True))
    # stored, and read back with the image as sent
    items = openai_client.responses.input_items.list(response.id).data
    assert items[0].content[1].type == "input_image"


def test_responses_codex_view_image_round_trip(openai_client):
    """Codex's view_image tool: its output is a list holding an input_image, sent back as a function_call_output."""
    view_image = {"type": "function", "name": "view_image", "description": "View a local image",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
    response = openai_client.responses.create(model=MODEL, tools=[view_image], input=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look at cat.png"}]},
        {"type": "function_call", "call_id": "call_v", "name": "view_image", "arguments": '{"path":"cat.png"}'},
        {"type": "function_call_output", "call_id": "call_v",
         "output": [{"type": "input_image", "image_url": png_data_url(12, 9)}]}])
    assert response.output_text == "[image 12x9]"
    follow = openai_client.responses.create(model=MODEL, previous_response_id=response.id, input="thanks")
    assert follow.output_text == "thanks"



def test_previous_response_id_and_conversations_carry_the_image_into_later_turns(openai_client):
    """A later turn's prompt holds the earlier image (its input tokens equal the whole history sent at once, and
    exceed the same chain without the image), by previous_response_id and by conversation; the conversation's
    items give the image back."""
    look = [{"role": "user", "content": [{"type": "input_text", "text": "look"},
                                         {"type": "input_image", "image_url": png_data_url(12, 9)}]}]
    first = openai_client.responses.create(model=MODEL, input=look)
    chained = openai_client.responses.create(model=MODEL, previous_response_id=first.id, input="again")
    whole = openai_client.responses.create(model=MODEL, store=False, input=[
        *look, {"role": "assistant", "content": first.output_text}, {"role": "user", "content": "again"}])
    assert chained.usage.input_tokens == whole.usage.input_tokens
    blind = openai_client.responses.create(model=MODEL, input=[{"role": "user", "content": "look"}])
    unseen = openai_client.responses.create(model=MODEL, previous_response_id=blind.id, input="again")
    assert unseen.usage.input_tokens < chained.usage.input_tokens
    conversation = openai_client.conversations.create()
    openai_client.responses.create(model=MODEL, conversation=conversation.id, input=look)
    later = openai_client.responses.create(model=MODEL, conversation=conversation.id, input="again")
    assert later.usage.input_tokens == whole.usage.input_tokens
    items = openai_client.conversations.items.list(conversation.id, order="asc").data
    assert items[0].content[1].type == "input_image" and items[0].content[1].image_url == look[0]["content"][1][
        "image_url"]

def test_responses_bad_image_names_the_part(server):
    body = {"model": MODEL, "input": [{"type": "message", "role": "user", "id": "msg_pic", "content": [
        {"type": "input_text", "text": "x"}, {"type": "input_image", "image_url": "data:image/png;base64,@@"}]}]}
    error = check_error(post(server.base_url, "/v1/responses", body), 400)
    assert error["param"] == "input[0].content[1]" and error["code"] == "invalid_base64"


# --- Messages ---------------------------------------------------------------------------------------------------

def b64_source(data: bytes = PNG, media_type: str = "image/png") -> dict:
    return {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}


def test_messages_image_block(anthropic_client):
    message = anthropic_client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
        {"type": "image", "source": b64_source(encoded(pattern(30, 20), "JPEG"), "image/jpeg")},
        {"type": "text", "text": "What is it?"}]}])
    assert message.content[0].text == "[image 30x20]What is it?"
    check_message(message.model_dump(mode="json"))


def test_messages_claude_code_reads_a_png(anthropic_client):
    """Claude Code's Read tool on a PNG: a tool_result holding an image block."""
    read = {"name": "Read", "description": "Read a file", "input_schema": {
        "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}
    message = anthropic_client.messages.create(model=MODEL, max_tokens=64, tools=[read], messages=[
        {"role": "user", "content": "What is in cat.png?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                           "input": {"file_path": "cat.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "image", "source": b64_source()}]}]}])
    assert message.content[0].text == "[image 24x16]"
    count = anthropic_client.messages.count_tokens(model=MODEL, messages=[
        {"role": "user", "content": [{"type": "image", "source": b64_source()}]}])
    assert count.input_tokens > 5


def test_messages_url_source_and_refusals(server, anthropic_client, images_host):
    message = anthropic_client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": images_host.url("/cat.png", host="localhost")}}]}])
    assert message.content[0].text == "[image 24x16]"
    hits = len(images_host.hits)
    cases = [({"type": "url", "url": images_host.url("/cat.png")}, "messages[0].content[1]"),
             (b64_source(b"not a png"), "messages[0].content[1]"),
             ({"type": "file", "file_id": "file_1"}, "messages[0].content[1].source")]
    for source, param in cases:
        body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x"}, {"type": "image", "source": source}]}]}
        response = httpx.post(f"{server.base_url}/v1/messages", json=body, headers=headers("none"), timeout=30)
        assert response.status_code == 400, response.text
        assert response.json()["type"] == "error"
        assert response.json()["error"]["message"].startswith(f"{param}: "), response.text
    assert len(images_host.hits) == hits



# --- every bad input on every API: a 400 naming the part, the server still serving ----------------------------------

BOMB = encoded(Image.new("1", (20000, 20000)), "PNG")  # 44 KiB of PNG that declares 400 million pixels
BAD_BYTES = [(b"\x89PNG\r\n\x1a\nnot really", "invalid_image"), (PNG[:80], "invalid_image"),
             (BOMB, "image_too_large"), (encoded(Image.new("1", (40000, 1)), "PNG"), "image_too_large"),
             (b"GIF89a", "invalid_image_format"), (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "invalid_image_format")]


def chat_with(parts: list[dict]) -> tuple[str, dict, str]:
    return "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x"}, *parts]}]}, "messages[0].content[1]"


def responses_with(parts: list[dict]) -> tuple[str, dict, str]:
    images = [{"type": "input_image", "image_url": part["image_url"]["url"]} for part in parts]
    return "/v1/responses", {"model": MODEL, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]},
        {"type": "function_call", "call_id": "c", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": images}]}, "input[2].output[0]"


def messages_with(parts: list[dict]) -> tuple[str, dict, str]:
    def block(url: str) -> dict:
        if not url.startswith("data:"):
            return {"type": "image", "source": {"type": "url", "url": url}}
        media_type, data = url.removeprefix("data:").split(";base64,")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return "/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": [block(part["image_url"]["url"]) for part in parts]}]}]}, \
        "messages[2].content[0].content[0]"


API_BODIES = {"chat": chat_with, "responses": responses_with, "messages": messages_with}


def refused_by(server, api: str, parts: list[dict], index: int = 0) -> dict:
    """The 400's error object, its param naming the part (`index`: which image of `parts`)."""
    path, body, param = API_BODIES[api](parts)
    param = param[:-2] + f"{int(param[-2]) + index}]"
    if api == "messages":
        response = httpx.post(f"{server.base_url}{path}", json=body, headers=headers("none"), timeout=60)
        assert response.status_code == 400 and response.json()["type"] == "error", response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"].startswith(f"{param}: "), error
    else:
        error = check_error(post(server.base_url, path, body), 400, param)
    good = API_BODIES[api]([picture()])
    assert post(server.base_url, good[0], good[1], headers=headers("none")).status_code == 200
    return error


@pytest.mark.parametrize("api", sorted(API_BODIES))
@pytest.mark.parametrize("data, code", BAD_BYTES, ids=["bad-png", "truncated", "bomb", "absurd-side", "bare-gif",
                                                       "svg"])
def test_bad_image_bytes_on_every_api(server, api, data, code):
    error = refused_by(server, api, [picture(), picture(data_url(data))], index=1)
    if api != "messages":  # Anthropic's error object has no code: the message says it
        assert error["code"] == code


@pytest.mark.parametrize("api", sorted(API_BODIES))
def test_bad_base64_and_media_types_on_every_api(server, api):
    assert "base64" in str(refused_by(server, api, [picture("data:image/png;base64,iVBOR#*!")]))
    assert "media type" in str(refused_by(server, api, [picture("data:text/plain;base64,aGVsbG8=")]))


@pytest.mark.parametrize("api", sorted(API_BODIES))
def test_too_many_images_on_every_api(server, api):
    tiny = picture(png_data_url(2, 2))
    assert "at most 256" in str(refused_by(server, api, [tiny] * 257, index=256))
    path, body, _ = API_BODIES[api]([tiny] * 256)
    assert post(server.base_url, path, body, headers=headers("none")).status_code == 200

# --- a model that cannot see ------------------------------------------------------------------------------------

def test_text_only_model_refuses_images_by_part(real_server):
    chat = {"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"}, picture()]}], "max_tokens": 4}
    model = httpx.get(f"{real_server.v1}/models", timeout=10).json()["data"][0]
    chat["model"] = model["id"]
    assert model["input_modalities"] == ["text"]
    error = check_error(post(real_server.base_url, "/v1/chat/completions", chat), 400, "messages[0].content[1]")
    assert error["code"] == "image_input_not_supported"
    responses = {"model": model["id"], "input": [{"type": "message", "role": "user", "id": "msg_1", "content": [
        {"type": "input_image", "image_url": png_data_url()}]}]}
    check_error(post(real_server.base_url, "/v1/responses", responses), 400, "input[0].content[0]")
    messages = {"model": model["id"], "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": b64_source()}]}]}
    response = httpx.post(f"{real_server.base_url}/v1/messages", json=messages, headers=headers("none"), timeout=30)
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    assert response.json()["error"]["message"].startswith("messages[0].content[0]: "), response.text
    assert post(real_server.base_url, "/v1/chat/completions", {**chat, "messages": [
        {"role": "user", "content": "hi"}]}).status_code == 200




@pytest.mark.parametrize("api", sorted(API_BODIES))
def test_ssrf_corpus_reaches_nothing_on_every_api(server, images_host, api):
    """Every spelling of a loopback, private or metadata address, and a trusted host's redirect to one: a 400
    naming the part, and the recording server (the would-be internal service) sees no hit."""
    from test_images import spellings

    images_host.routes["/hop"] = Route(302, headers={"Location": images_host.url("/cat.png")})
    urls = [url.replace("/secret.png", "/cat.png") for url in spellings(images_host.port)
            if "//localhost" not in url.lower()]  # this server trusts that name (--image-allow-hosts)
    hits = len(images_host.hits)
    for url in urls:
        assert refused_by(server, api, [picture(url)]), url
    assert len(images_host.hits) == hits
    assert refused_by(server, api, [picture(images_host.url("/hop", host="localhost"))])
    assert images_host.hits[hits:] == ["/hop"]  # the trusted name answered; where it pointed was never asked

@pytest.mark.parametrize("api", sorted(API_BODIES))
def test_text_only_model_refuses_images_in_tool_results(real_server, api):
    """Codex's view_image output, a Chat tool message, Claude Code's tool_result: a 400 naming the image, counting
    routes too, never the image dropped."""
    model = httpx.get(f"{real_server.v1}/models", timeout=10).json()["data"][0]["id"]
    if api == "chat":
        path, body, param = "/v1/chat/completions", {"model": model, "max_tokens": 4, "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                  "function": {"name": "view_image", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "y"}, picture()]}]}, \
            "messages[2].content[1]"
    else:
        path, body, param = API_BODIES[api]([picture()])
        body = {**body, "model": model, **({"max_output_tokens": 16} if api == "responses" else {})}
    counting = {"messages": "/v1/messages/count_tokens", "responses": "/v1/responses/input_tokens"}.get(api)
    for route in [path, *([counting] if counting else [])]:
        sent = {key: value for key, value in body.items() if route == path or key != "max_tokens"}
        response = httpx.post(f"{real_server.base_url}{route}", json=sent, headers=headers("none"), timeout=60)
        assert response.status_code == 400, (route, response.text)
        error = response.json()["error"]
        if api == "messages":
            assert error["message"].startswith(f"{param}: "), error
        else:
            assert error["param"] == param and error["code"] == "image_input_not_supported", error

# --- a gateway ----------------------------------------------------------------------------------------------------

def test_gateway_fetches_and_passes_images_on(server, images_host):
    """The gateway fetches (under its own address policy) and sends the upstream a PNG data URL, never the URL."""
    gateway = RunningServer(["--engine", "remote", "--upstream", server.v1, "--image-allow-hosts", "localhost"])
    try:
        client = OpenAI(base_url=gateway.v1, api_key="none", max_retries=0)
        [card] = client.models.list().data
        assert card.model_extra["input_modalities"] == ["text", "image"]  # as its upstream says
        hits = len(images_host.hits)
        reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "text", "text": "relayed"}, picture(images_host.url("/cat.png", host="localhost"))]}])
        assert reply.choices[0].message.content == "relayed[image 24x16]"
        assert len(images_host.hits) == hits + 1  # the gateway's one fetch; the upstream was sent the pixels
        # Responses and Messages through the gateway: the upstream sees each image where it stands
        response = client.responses.create(model=MODEL, input=[{"role": "user", "content": [
            {"type": "input_text", "text": "via responses"}, {"type": "input_image", "image_url": png_data_url(6, 5)}]}])
        assert response.output_text == "via responses[image 6x5]"
        message = anthropic.Anthropic(base_url=gateway.base_url, api_key="none", max_retries=0).messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
                {"type": "text", "text": "via messages"}, {"type": "image", "source": b64_source()}]}])
        assert message.content[0].text == "via messages[image 24x16]"
        body = {"model": MODEL, "messages": [{"role": "user", "content": [picture(images_host.url("/cat.png"))]}]}
        check_error(post(gateway.base_url, "/v1/chat/completions", body), 400, "messages[0].content[0]")
        assert len(images_host.hits) == hits + 1
    finally:
        gateway.stop()



def test_gateway_in_front_of_a_text_only_model_says_so(real_server):
    """The upstream's card says text only: so does the gateway's, and an image gets the upstream's 400 by part."""
    gateway = RunningServer(["--engine", "remote", "--upstream", real_server.v1])
    try:
        [card] = httpx.get(f"{gateway.v1}/models", timeout=10).json()["data"]
        assert card["input_modalities"] == ["text"]
        body = {"model": card["id"], "max_tokens": 2, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x"}, picture()]}]}
        error = check_error(post(gateway.base_url, "/v1/chat/completions", body), 400, "messages[0].content[1]")
        assert error["code"] == "image_input_not_supported"
    finally:
        gateway.stop()

def test_no_image_urls_flag(images_host):
    server = RunningServer(["--engine", "scripted", "--no-image-urls", "--image-allow-hosts", "localhost"])
    try:
        hits = len(images_host.hits)
        body = {"model": MODEL, "messages": [{"role": "user", "content": [
            picture(images_host.url("/cat.png", host="localhost"))]}]}
        error = check_error(post(server.base_url, "/v1/chat/completions", body), 400, "messages[0].content[0]")
        assert error["code"] == "image_urls_disabled" and len(images_host.hits) == hits
        body["messages"][0]["content"] = [picture()]  # data URLs still work
        assert post(server.base_url, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"] == \
            "[image 24x16]"
    finally:
        server.stop()


def test_responses_stream_equals_response_and_custom_tool_output(server):
    from test_api_responses import raw_stream

    body = {"model": MODEL, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "apply"}]},
        {"type": "custom_tool_call", "call_id": "call_c", "name": "snap", "input": "screen"},
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": [
            {"type": "input_text", "text": "shot:"}, {"type": "input_image", "image_url": png_data_url(6, 5)}]}],
        "tools": [{"type": "custom", "name": "snap", "description": "a screenshot"}]}
    whole = check_response(post(server.base_url, "/v1/responses", body).json())
    text = whole["output"][-1]["content"][0]["text"]
    assert text == "shot:[image 6x5]"
    events = raw_stream(server.base_url, body)
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == text


def test_messages_stream_with_an_image(anthropic_client):
    with anthropic_client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
            {"type": "text", "text": "streamed"}, {"type": "image", "source": b64_source()}]}]) as stream:
        message = stream.get_final_message()
    assert message.content[0].text == "streamed[image 24x16]"


# --- README.md's example ------------------------------------------------------------------------------------------

def test_readme_image_example_runs_as_written():
    """The Images section's curl block, run by bash against the server its first line starts (on a free port):
    its output is the `# ` lines that end the block."""
    from readme_clients import setup_block

    serve, *rest = setup_block("images-curl").splitlines()
    words = shlex.split(serve, comments=True)
    assert words[:2] == ["rostra", "serve"] and words[-1] == "&", serve
    expected = [line[2:] for line in rest if line.startswith("# ")]
    command = "\n".join(line for line in rest if not line.startswith("#"))
    assert "localhost:8000" in command and expected
    readme_server = RunningServer(words[2:-1])
    try:
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", command.replace("localhost:8000",
                                                                               f"127.0.0.1:{readme_server.port}")],
                              capture_output=True, text=True, timeout=60)
    finally:
        readme_server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
