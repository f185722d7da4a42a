"""Remake the README's pictures of the playground (docs/playground.png, docs/playground-phone.png).

    python docs/screenshots.py

Starts `rostra serve` with the scripted engine on tests/data/playground.jsonl (as a Qwen3 server is set up:
qwen3 reasoning, hermes tool calls) on a free port, plays two turns in Debian's Chromium through Playwright
(the test extra), and photographs the page at a desktop and a phone width.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                         "required": ["city"]}}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    urllib.request.urlopen(request).read()


def wait_answered(page) -> None:
    page.wait_for_function("""() => {
        const answers = document.querySelectorAll('.message.assistant');
        const last = answers[answers.length - 1];
        return last && /out/.test(last.querySelector('.stats').textContent);
    }""")


def main() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "rostra.cli", "serve", "--engine", "scripted", "--script",
         str(ROOT / "tests/data/playground.jsonl"), "--reasoning-parser", "qwen3", "--tool-call-parser", "hermes",
         "--port", str(port), "--data-dir", tempfile.mkdtemp(prefix="rostra-shots-"), "--log-level", "warning"])
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/health").read()
                break
            except OSError:
                time.sleep(0.2)
        for title in ("Weather in Oslo", "A haiku about servers"):  # older conversations in the sidebar
            post(f"{base}/v1/conversations", {"metadata": {"title": title}})
            time.sleep(1.1)  # created_at has seconds: keep the order
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 760})
            page.goto(f"{base}/")
            page.wait_for_selector("body[data-ready=true]")
            page.click("#settings-toggle")
            page.fill("#instructions", "You are a helpful assistant.")
            page.fill("#function-tools", json.dumps(TOOLS))
            page.fill("#temperature", "0.7")
            page.fill("#max_output_tokens", "512")
            page.click("#settings-close")
            page.fill("#prompt", "plan a picnic for Saturday")
            page.press("#prompt", "Enter")
            wait_answered(page)
            page.fill("#prompt", "think then call: what is the weather there?")
            page.press("#prompt", "Enter")
            wait_answered(page)
            page.click("#settings-toggle")
            page.evaluate("document.activeElement.blur(); document.getElementById('messages').scrollTop = 0")
            page.screenshot(path=str(ROOT / "docs/playground.png"))
            conversation = page.evaluate("location.hash")
            phone = browser.new_page(viewport={"width": 390, "height": 760}, is_mobile=True)
            phone.goto(f"{base}/{conversation}")
            phone.wait_for_selector(".message.assistant")
            phone.evaluate("document.getElementById('messages').scrollTop = 0")
            phone.screenshot(path=str(ROOT / "docs/playground-phone.png"))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=15)


if __name__ == "__main__":
    main()
