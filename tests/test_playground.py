"""The playground at `/` in a real browser: Debian's Chromium (the `chromium` package, which .ci/run installs)
driven by Playwright for Python, against real `rostra serve` processes over HTTP.

Against the scripted engine (tests/data/playground.jsonl): answers stream token by token, reasoning and a
tool call are drawn (and the tool's output goes back), stop aborts the generation, conversations are listed
and reopen after a reload, the model picker lists the served models, "Show request" reproduces the turn,
HTML a model writes stays inert, the API key is asked for. Against the embedded model: one real answer.

The script's reasoning and tool-call lines are written the way Qwen3 writes them (`<think>` ... `</think>`,
then a Hermes-style `<tool_call>` JSON object: Qwen3's chat template and model card), read by the qwen3
reasoning parser and the hermes tool parser, as a Qwen3 server would be started.

Without Chromium these tests skip, except under CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import API_KEY, scripted
from node_clients import node_client
from servers import RunningServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Chromium offline and quiet: no sandbox (CI runs as root), no GPU, nothing fetched in the background.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]
TIMEOUT_MS = 20_000
WEATHER_TOOL = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                 "unit": {"type": "string"}},
                                "required": ["city"]}}]
SCRIPT = [json.loads(line) for line in (Path(__file__).parent / "data" / "playground.jsonl").read_text().splitlines()]


def script_output(prefix: str) -> str:
    return next(line["output"] for line in SCRIPT if line["match"] == f"^{prefix}")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        reason = "no Chromium: apt-get install chromium (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def server():
    """The scripted engine as a Qwen3 server would be set up, under two names (the picker lists both)."""
    running = RunningServer(list(scripted("playground.jsonl", "--reasoning-parser", "qwen3", "--tool-call-parser",
                                          "hermes", "--served-model-name", "scripted", "scripted-b")))
    yield running
    running.stop()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    yield page
    context.close()
    assert not errors, f"the page threw: {errors}"


def send(page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def last_answer(page):
    return page.locator(".message.assistant").last


# What wait_for_function polls is always an arrow function: a bare expression would be eval'd in the page,
# which the page's Content-Security-Policy forbids.
def wait_answered(page) -> None:
    """Until the last answer has its statistics (the stream ended with a final response)."""
    page.wait_for_function("""() => {
        const answers = document.querySelectorAll('.message.assistant');
        const last = answers[answers.length - 1];
        return last && !last.classList.contains('streaming') && /out/.test(last.querySelector('.stats').textContent);
    }""")


def record_lengths(page, selector: str) -> None:
    """Record the text length of the last `selector` in the page at every DOM change, for the test to read."""
    page.evaluate("""(selector) => {
        window.__lengths = [];
        new MutationObserver(() => {
            const nodes = document.querySelectorAll(selector);
            const node = nodes[nodes.length - 1];
            if (node) window.__lengths.push(node.textContent.length);
        }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
    }""", selector)


def grew_in_steps(page) -> list[int]:
    lengths = page.evaluate("window.__lengths")
    return sorted(set(lengths))


def test_model_picker_lists_the_served_models(page, server):
    served = [model["id"] for model in httpx.get(f"{server.v1}/models").json()["data"]]
    options = page.locator("#model option").evaluate_all("options => options.map(o => o.value)")
    assert options == served == ["scripted", "scripted-b"]
    page.select_option("#model", "scripted-b")
    send(page, "say hello")
    wait_answered(page)
    response_id = last_answer(page).get_attribute("data-response-id")
    assert httpx.get(f"{server.v1}/responses/{response_id}").json()["model"] == "scripted-b"
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.input_value("#model") == "scripted-b"  # the choice is kept in the browser


def test_answer_streams_token_by_token(page):
    record_lengths(page, ".message.assistant .markdown")
    send(page, "stream slowly")
    wait_answered(page)
    steps = grew_in_steps(page)
    # 40 ms a token: the text grew in many steps, not at once.
    assert len(steps) >= 10, steps
    answer = last_answer(page)
    assert answer.locator(".markdown strong").inner_text() == "one token"
    assert answer.locator(".markdown ol li").all_inner_texts() == ["rostra reads the model's tokens",
                                                                   "the page draws them as they come"]
    assert answer.locator(".code-block code.language-python").inner_text() == 'print("hello from rostra")'
    stats = answer.locator(".stats").inner_text()
    assert re.fullmatch(r"\d+ in · \d+ out · TTFT \d+ ms · [\d.]+ tok/s", stats), stats
    assert page.locator(".message.user .bubble").inner_text() == "stream slowly"


def test_reasoning_and_a_tool_call_then_its_output(page):
    conversations = page.locator("#conversations li").count()
    page.click("#settings-toggle")
    page.fill("#function-tools", "[{not json")
    page.click("#settings-close")
    send(page, "think then call")
    page.locator("#error-banner").wait_for(state="visible")
    assert page.locator("#error-banner").inner_text().startswith("Function tools: not JSON")
    assert page.input_value("#prompt") == "think then call"  # nothing sent, nothing lost, nothing made
    assert page.locator("#conversations li").count() == conversations and page.locator(".message").count() == 0
    page.click("#settings-toggle")
    page.fill("#function-tools", json.dumps(WEATHER_TOOL))
    page.click("#settings-close")
    record_lengths(page, ".tool-call .tool-args")
    send(page, "think then call")
    wait_answered(page)
    answer = last_answer(page)
    reasoning = answer.locator("details.reasoning")
    assert "The user wants the weather in Oslo" in reasoning.locator(".reasoning-text").text_content()
    assert reasoning.evaluate("node => node.open") is False  # folded once the answer went on
    reasoning.locator("summary").click()
    assert reasoning.evaluate("node => node.open") is True
    call = answer.locator(".tool-call.function")
    assert call.locator(".tool-name").inner_text() == "get_weather"
    assert json.loads(call.locator(".tool-args").inner_text()) == {"city": "Oslo", "unit": "celsius"}
    assert len(grew_in_steps(page)) >= 3  # the arguments streamed in pieces
    assert "reasoning" in answer.locator(".stats").inner_text()
    # The client runs function tools: the page asks for the output and sends it back.
    call.locator(".tool-output input").fill("sunny, 21 °C")
    call.locator(".tool-output button").click()
    page.wait_for_function("() => document.querySelectorAll('.message.assistant').length === 2")
    wait_answered(page)
    assert last_answer(page).locator(".markdown").inner_text() == "It is sunny in Oslo today, 21 °C."


def test_stop_mid_answer_aborts_the_generation(page, server):
    send(page, "long story")
    page.wait_for_function("""() => {
        const text = document.querySelector('.message.assistant .markdown');
        return text && text.textContent.length > 20;
    }""")
    assert page.is_visible("#stop") and not page.is_visible("#send")
    page.click("#stop")
    answer = last_answer(page)
    answer.locator(".answer-note", has_text="stopped").wait_for()
    shown = answer.locator(".markdown").inner_text()
    assert 20 < len(shown) < len(script_output("long story")) // 2
    assert page.is_visible("#send")
    # The server noticed and the engine dropped the generation (80 ms a token: it had seconds to go).
    deadline = time.monotonic() + 5
    while httpx.get(f"{server.base_url}/health").json()["running"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert httpx.get(f"{server.base_url}/health").json()["running"] == 0
    time.sleep(0.3)
    assert answer.locator(".markdown").inner_text() == shown  # nothing more arrived
    # A turn cut off is not kept in the conversation (rostra appends a turn once it has ended).
    conversation_id = page.evaluate("location.hash.slice(1)")
    assert httpx.get(f"{server.v1}/conversations/{conversation_id}/items").json()["data"] == []
    # Escape stops too.
    send(page, "long story")
    page.wait_for_function("() => document.querySelectorAll('.message.assistant .markdown').length === 2")
    page.keyboard.press("Escape")
    last_answer(page).locator(".answer-note", has_text="stopped").wait_for()


def test_conversations_are_listed_reopen_rename_and_delete(page, server):
    send(page, "say hello")
    wait_answered(page)
    conversation_id = page.evaluate("location.hash.slice(1)")
    assert conversation_id.startswith("conv_")
    page.goto(server.base_url + "/")  # a fresh load, not at the conversation
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator(".message").count() == 0
    entry = page.locator(f"li[data-conversation-id={conversation_id}]")
    assert entry.locator(".conversation-open").inner_text() == "say hello"
    entry.locator(".conversation-open").click()
    page.wait_for_selector(".message.assistant")
    assert page.locator(".message.user .bubble").all_inner_texts() == ["say hello"]
    assert last_answer(page).locator(".markdown").inner_text() == "Hello! How can I help you today?"
    # Reloading at the conversation opens it again.
    page.reload()
    page.wait_for_selector(".message.assistant")
    assert page.locator(".message.user .bubble").all_inner_texts() == ["say hello"]
    # Rename from the keyboard.
    entry.locator(".conversation-rename").click()
    page.keyboard.press("Control+A")
    page.keyboard.type("Greetings")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"li[data-conversation-id={conversation_id}] >> text=Greetings")
    stored = httpx.get(f"{server.v1}/conversations/{conversation_id}").json()
    assert stored["metadata"]["title"] == "Greetings"
    # Delete (after the confirmation).
    page.once("dialog", lambda dialog: dialog.accept())
    entry.locator(".conversation-delete").click()
    entry.wait_for(state="detached")
    assert httpx.get(f"{server.v1}/conversations/{conversation_id}").status_code == 404
    assert page.locator(".message").count() == 0 and page.is_visible("#welcome")


def test_html_from_the_model_stays_inert(page):
    send(page, "inject html")
    wait_answered(page)
    page.mouse.move(200, 200)
    answer = last_answer(page)
    # Shown as text, never as elements; the javascript: link is not a link.
    body = answer.locator(".answer-body")
    assert body.locator("script, img, iframe, svg, b, [onerror], [onload], [onmouseover]").count() == 0
    assert body.locator("a").count() == 0
    text = body.inner_text()
    for markup in ("<script>window.__pwned = 'script'</script>", "<img src=x onerror=", "<iframe src=",
                   "[click me](javascript:", "<svg onload="):
        assert markup in text
    for node in body.locator("b, strong").all():
        node.hover()
    assert page.evaluate("window.__pwned") is None
    assert answer.locator(".code-block code.language-html").inner_text() == "<script>window.__pwned = 'code'</script>"


MARKDOWN_CASES = [
    ("**bold** and *it* and `a<b>` and ~~gone~~", "<p><strong>bold</strong> and <em>it</em> and <code>a&lt;b&gt;</code> "
                                                   "and <del>gone</del></p>"),
    ("snake_case_name stays", "<p>snake_case_name stays</p>"),
    ("init__x__y and __bold__", "<p>init__x__y and <strong>bold</strong></p>"),
    ("# Title\ntext", "<h3>Title</h3><p>text</p>"),
    ("- a\n- b\n\n1. one\n2. two", "<ul><li>a</li><li>b</li></ul><ol><li>one</li><li>two</li></ol>"),
    ("> quoted *words*", "<blockquote><p>quoted <em>words</em></p></blockquote>"),
    ("[site](https://example.org/x?a=1&b=2)", '<p><a href="https://example.org/x?a=1&amp;b=2" target="_blank" '
                                              'rel="noopener noreferrer nofollow">site</a></p>'),
    ("[bad](javascript:alert(1))", "<p>[bad](javascript:alert(1))</p>"),
    ("| a | b |\n|---|---|\n| 1 | 2 |", '<div class="table-wrap"><table><thead><tr><th>a</th><th>b</th></tr></thead>'
                                         "<tbody><tr><td>1</td><td>2</td></tr></tbody></table></div>"),
    ("line one\nline two", "<p>line one<br>line two</p>"),
    ("<b>x</b> & <i>", "<p>&lt;b&gt;x&lt;/b&gt; &amp; &lt;i&gt;</p>"),
]


def test_markdown_renderer(page):
    """The renderer itself, case by case, in the browser that runs it (code blocks: see the streaming test)."""
    rendered = page.evaluate("""async (cases) => {
        const { renderMarkdown } = await import('/playground/markdown.js');
        return cases.map((text) => {
            const box = document.createElement('div');
            box.append(renderMarkdown(text));
            return box.innerHTML;
        });
    }""", [text for text, _ in MARKDOWN_CASES])
    assert rendered == [html for _, html in MARKDOWN_CASES]
    # A fence still streaming renders as code so far.
    partial = page.evaluate("""async () => {
        const { renderMarkdown } = await import('/playground/markdown.js');
        const box = document.createElement('div');
        box.append(renderMarkdown('```js\\nlet a = 1;'));
        return box.querySelector('code.language-js').textContent;
    }""")
    assert partial == "let a = 1;"


def test_show_request_reproduces_the_turn(page, server, tmp_path):
    page.click("#settings-toggle")
    page.fill("#instructions", "Be brief.")
    page.fill("#temperature", "0.5")
    page.fill("#max_output_tokens", "64")
    page.click("#settings-close")
    send(page, "say hello")
    wait_answered(page)
    last_answer(page).locator(".answer-footer button", has_text="Request").click()
    page.click("[role=tab][data-lang=python]")
    python = page.inner_text("#request-code")
    assert "instructions=\"Be brief.\"" in python and "temperature=0.5" in python
    assert "max_output_tokens=64" in python and "conversation=\"conv_" in python
    # The snippet is a working program: run it with the openai SDK against the server.
    script = tmp_path / "turn.py"
    script.write_text(python)
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "ROSTRA_API_KEY": "unused"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Hello! How can I help you today?"
    page.click("[role=tab][data-lang=curl]")
    curl = page.inner_text("#request-code")
    assert curl.startswith(f"curl -N {server.base_url}/v1/responses")
    body = curl_body(curl)
    assert body == {"model": "scripted", "input": "say hello", "conversation": body["conversation"],
                    "instructions": "Be brief.", "temperature": 0.5, "max_output_tokens": 64, "stream": True}
    if shutil.which("curl"):
        ran = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60)
        assert "response.completed" in ran.stdout
    page.keyboard.press("Escape")
    assert not page.evaluate("document.getElementById('request-dialog').open")


def curl_body(curl: str) -> dict:
    """The JSON body of the curl tab's command (a quoted here-document)."""
    return json.loads(re.search(r"<<'JSON'\n(.*)\nJSON$", curl, re.S).group(1))


def test_show_request_javascript_runs_with_the_openai_sdk(page, tmp_path):
    """The JavaScript tab's program, run by Node with OpenAI's JavaScript SDK (tests/clients/openai-node)."""
    client = node_client("openai-node")
    page.click("#settings-toggle")
    page.fill("#top_p", "0.9")
    page.click("#settings-close")
    page.fill("#prompt", "say hello")
    page.click("#show-request")  # the turn about to be sent, before any conversation exists
    page.click("[role=tab][data-lang=javascript]")
    javascript = page.inner_text("#request-code")
    assert javascript.startswith('import OpenAI from "openai";') and '"top_p": 0.9' in javascript
    assert '"conversation"' not in javascript
    (tmp_path / "node_modules").symlink_to(client / "node_modules")  # where Node resolves "openai" from
    (tmp_path / "turn.mjs").write_text(javascript)
    ran = subprocess.run(["node", str(tmp_path / "turn.mjs")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "ROSTRA_API_KEY": "unused"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Hello! How can I help you today?"


def test_keyboard_only(page):
    """Every control is reached with Tab; the request dialog works with Enter, the arrow keys and Escape."""
    reached: list[str] = []
    while "send" not in reached and len(reached) < 200:  # past the sidebar's conversations (earlier tests')
        page.keyboard.press("Tab")
        reached.append(page.evaluate("() => document.activeElement.id || document.activeElement.className"))
    for control in ("model", "show-request", "settings-toggle", "new-chat", "prompt", "send"):
        assert control in reached, reached
    page.focus("#show-request")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.getElementById('request-dialog').open")
    page.focus("[role=tab][data-lang=curl]")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.dataset.lang") == "python"
    assert page.inner_text("#request-code").startswith("import os")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("[role=tab][data-lang=javascript]", "aria-selected") == "true"
    page.keyboard.press("Escape")
    assert not page.evaluate("() => document.getElementById('request-dialog').open")
    page.focus("#prompt")
    page.keyboard.type("say hello")
    page.keyboard.press("Enter")
    wait_answered(page)
    assert page.evaluate("() => document.activeElement.id") == "prompt"  # ready for the next message


def test_phone_sized_window(browser, server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # nothing sticks out
    assert not page.is_visible("#new-chat")  # the sidebar waits behind the menu button
    send(page, "stream slowly")
    wait_answered(page)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.click("#menu-toggle")
    page.locator("#new-chat").wait_for(state="visible")
    page.locator(".conversation-open", has_text="stream slowly").first.click()
    page.wait_for_selector(".message.assistant")
    page.locator("#new-chat").wait_for(state="hidden")  # opening a conversation closes the sidebar
    context.close()


def test_api_key_asked_for_and_kept_in_the_browser(browser, auth_server):
    base = auth_server.base_url
    # The page loads without a key; the API does not answer without one.
    assert httpx.get(f"{base}/").status_code == 200
    assert httpx.get(f"{base}/playground/app.js").status_code == 200
    assert httpx.get(f"{base}/v1/models").status_code == 401
    assert httpx.get(f"{base}/playground/config").status_code == 401
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base}/")
    page.locator("#auth-banner").wait_for(state="visible")
    page.fill("#auth-banner-key", API_KEY)
    page.press("#auth-banner-key", "Enter")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#model option").all_inner_texts() == ["scripted"]
    send(page, "say hello")
    wait_answered(page)
    assert page.evaluate("localStorage.getItem('rostra.playground.apiKey')") == API_KEY
    page.click("#show-request")
    assert 'Authorization: Bearer $ROSTRA_API_KEY' in page.inner_text("#request-code")
    assert API_KEY not in page.inner_text("#request-code")  # the key is never written into a snippet
    context.close()


def test_the_page_and_its_headers(server):
    page = httpx.get(f"{server.base_url}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    for name, kind in [("app.js", "text/javascript"), ("style.css", "text/css"), ("markdown.js", "text/javascript")]:
        asset = httpx.get(f"{server.base_url}/playground/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    missing = httpx.get(f"{server.base_url}/playground/nope.js")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{server.base_url}/playground/config").json() == {"tool_servers": []}


def test_a_real_answer_from_the_embedded_model(browser, real_server):
    context = browser.new_context()
    context.set_default_timeout(120_000)
    page = context.new_page()
    page.goto(real_server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    page.click("#settings-toggle")
    page.fill("#max_output_tokens", "24")
    page.fill("#temperature", "0")
    page.click("#settings-close")
    send(page, "What is the capital of France?")
    wait_answered(page)
    answer = last_answer(page)
    assert answer.locator(".markdown").inner_text().strip()
    out = int(re.search(r"(\d+) out", answer.locator(".stats").inner_text()).group(1))
    assert 0 < out <= 24
    context.close()


@pytest.fixture(scope="module")
def mcp_server():
    from test_api_mcp import McpProcess

    calculator = McpProcess("streamable-http")
    running = RunningServer(list(scripted("mcp.jsonl", "--tool-call-parser", "hermes",
                                          "--tool-server", f"calc={calculator.url}", "--mcp-timeout", "10")))
    yield running
    running.stop()
    calculator.stop()


def test_mcp_tool_server_calls_and_approvals(browser, mcp_server):
    """A --tool-server of the server: offered in the settings, its listing and calls drawn, each call approved
    (or denied) in the page first; then without asking."""
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(mcp_server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    page.click("#settings-toggle")
    row = page.locator("[data-mcp-label=calc]")
    assert row.locator("input[type=checkbox]").is_checked() and row.locator("select").input_value() == "always"
    page.click("#settings-close")
    send(page, "add 2 and 3")
    wait_answered(page)
    answer = last_answer(page)
    assert answer.locator(".tool-note", has_text="calc offers").inner_text().startswith("calc offers 6 tools: add")
    approval = answer.locator(".tool-call.approval")
    assert "calc wants to run add" in approval.inner_text()
    assert json.loads(approval.locator(".tool-args").inner_text()) == {"a": 2, "b": 3}
    approval.locator("button", has_text="Approve").click()
    page.wait_for_function("() => document.querySelectorAll('.message.assistant').length === 2")
    wait_answered(page)
    answer = last_answer(page)
    call = answer.locator(".tool-call.mcp")
    assert call.locator(".tool-name").inner_text() == "calc · add"
    assert call.locator(".tool-output-text").inner_text() == "5"
    assert answer.locator(".markdown").last.inner_text() == "The sum is 5."
    # Without asking: the call runs within the same answer.
    page.click("#settings-toggle")
    row.locator("select").select_option("never")
    page.click("#settings-close")
    send(page, "add 2 and 3 again")
    page.wait_for_function("() => document.querySelectorAll('.message.assistant').length === 3")
    wait_answered(page)
    answer = last_answer(page)
    assert answer.locator(".tool-call.approval").count() == 0
    assert answer.locator(".tool-call.mcp .tool-output-text").inner_text() == "5"
    assert answer.locator(".markdown").last.inner_text() == "The sum is 5."
    context.close()
