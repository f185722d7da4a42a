"""LangChain's ChatOpenAI against `rostra serve`, through langchain-tests' standard integration suite,
unmodified: Chat Completions, and the Responses API (`use_responses_api=True`).

The scripted engine (tests/data/clients.jsonl) answers the suite's prompts as a tool-calling model
would: with tool_choice "auto" in the hermes format (`<tool_call>\\n{"name", "arguments"}\\n</tool_call>`,
as Qwen2.5 and Hermes models write it), with a forced tool choice ("any" -> "required", or a named
function) in the shape rostra's constraint allows a real model on llama.cpp (a JSON list of calls, or
the named function's arguments), structured output as JSON of the asked schema. The server gets no
sampling parameters from these clients: ChatOpenAI's defaults send none.

Every protocol-level test runs (the per-call model override with a second served name of the model),
images too (in a user message and in a tool message: the scripted engine sees them as `[image WxH]`); those
skipped are the suite's own opt-ins for what rostra does not take (PDFs, audio, Anthropic-style content blocks),
image URLs (the suite's image lives on GitHub, out of reach here) and VCR cassettes (recorded traffic, for a
hosted API's benchmarks).
"""

import io

import httpx
import pytest
from PIL import Image
from langchain_openai import ChatOpenAI
from langchain_tests.integration_tests import ChatModelIntegrationTests

from rostra.generation_defaults import EMBEDDED_DEFAULTS
from servers import DATA, RunningServer

MODEL = "scripted"
OTHER_MODEL = "scripted-alt"  # a second name of the same model, for the suite's per-call model override
_server: dict[str, str] = {}


# The suite downloads its test image (a PNG in LangChain's docs repository) with httpx.get before sending it as
# base64; with no network here the test gets a PNG made on the spot instead. Only the suite's own download is
# answered so: the client under test (ChatOpenAI, on its own httpx.Client) is untouched.
SUITE_IMAGE = "https://raw.githubusercontent.com/langchain-ai/docs/"


@pytest.fixture(autouse=True)
def suite_image_offline(monkeypatch):
    download = httpx.get

    def get(url, *args, **kwargs):
        if str(url).startswith(SUITE_IMAGE):
            png = io.BytesIO()
            Image.new("RGB", (64, 48), (30, 120, 200)).save(png, format="PNG")
            return httpx.Response(200, content=png.getvalue(), request=httpx.Request("GET", url))
        return download(url, *args, **kwargs)

    monkeypatch.setattr(httpx, "get", get)


@pytest.fixture(scope="module", autouse=True)
def langchain_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "clients.jsonl"),
                            "--tool-call-parser", "hermes", "--served-model-name", MODEL, OTHER_MODEL])
    _server["v1"] = server.v1
    yield server
    server.stop()


class TestChatCompletions(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[ChatOpenAI]:
        return ChatOpenAI

    @property
    def chat_model_params(self) -> dict:
        # stream_usage: ChatOpenAI asks for streamed usage only from api.openai.com unless told to.
        return {"model": MODEL, "base_url": _server["v1"], "api_key": "unused", "stream_usage": True,
                "max_retries": 0}

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def model_override_value(self) -> str:
        return OTHER_MODEL

    @property
    def supports_image_inputs(self) -> bool:
        return True

    @property
    def supports_image_tool_message(self) -> bool:
        return True


class TestResponses(TestChatCompletions):
    @property
    def chat_model_params(self) -> dict:
        return {**super().chat_model_params, "use_responses_api": True}


@pytest.mark.parametrize("prompt", ["Hello", "What is the capital of France?"])
def test_no_parameters_on_the_embedded_model_end_in_an_answer(real_server, prompt):
    """ChatOpenAI() as a user writes it: no temperature, no max_tokens. The server's defaults (the
    model card's sampling and a default length) make the answer end, by itself or at that length."""
    chat = ChatOpenAI(base_url=real_server.v1, api_key="unused", model="SmolLM2-135M-Instruct", max_retries=0)
    reply = chat.invoke(prompt)
    assert reply.text and reply.response_metadata["finish_reason"] in ("stop", "length")
    assert reply.usage_metadata["output_tokens"] <= EMBEDDED_DEFAULTS["max_tokens"]
