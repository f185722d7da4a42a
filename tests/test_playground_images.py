"""Images in the playground, in Debian's Chromium driven by Playwright against real `rostra serve` processes.

An image comes in by the file picker, a paste into the message box or a drop on the composer; it waits as a
removable thumbnail, goes out as an `input_image` part of the turn's user message, and is drawn in the turn and
again when the conversation is reopened from the server. The scripted engine answers by echoing the message, in
which it sees each image as `[image WxH]`: the answer shows the server got each image whole, at its size.
"""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys

import httpx
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from PIL import Image

from node_clients import node_client
from test_playground import TIMEOUT_MS, browser, curl_body, last_answer, page, send, server, wait_answered

__all__ = ["browser", "page", "server"]  # the fixtures, shared with test_playground.py

MARKERS = "[image 3x2][image 5x4]"


def png(width: int, height: int) -> bytes:
    image = Image.new("RGB", (width, height))
    image.putdata([(40 * x % 256, 60 * y % 256, 128) for y in range(height) for x in range(width)])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def pick(page, name: str, data: bytes, mime: str = "image/png") -> None:
    """Attach a file through the attach button's file chooser, as a person would."""
    with page.expect_file_chooser() as chooser:
        page.click("#attach")
    chooser.value.set_files(files=[{"name": name, "mimeType": mime, "buffer": data}])


def dispatch_files(page, event: str, name: str, data: bytes, mime: str = "image/png", size: int = 0) -> None:
    """A paste (on the message box) or a drop (on the composer) carrying one file, as the browser fires them.
    With `size`, the file is that many zero bytes instead of `data`."""
    page.evaluate("""([event, name, b64, mime, size]) => {
        const bytes = size ? new Uint8Array(size) : Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const transfer = new DataTransfer();
        transfer.items.add(new File([bytes], name, { type: mime }));
        const target = document.getElementById(event === 'paste' ? 'prompt' : 'composer');
        const init = { bubbles: true, cancelable: true };
        target.dispatchEvent(event === 'paste' ? new ClipboardEvent('paste', { ...init, clipboardData: transfer })
                                               : new DragEvent('drop', { ...init, dataTransfer: transfer }));
    }""", [event, name, base64.b64encode(data).decode(), mime, size])


def thumbnails(page, selector: str) -> list[list[int]]:
    page.wait_for_function("""(selector) => [...document.querySelectorAll(selector)].every((img) => img.complete)""",
                           arg=selector)
    return page.locator(selector).evaluate_all("images => images.map((img) => [img.naturalWidth, img.naturalHeight])")


def attach_two(page, second_by: str) -> None:
    pick(page, "small.png", png(3, 2))
    dispatch_files(page, second_by, "wide.png", png(5, 4))
    page.wait_for_function("() => document.querySelectorAll('#attachments img').length === 2")


def test_picked_and_pasted_images_are_sent_shown_and_reloaded(page, server):
    attach_two(page, "paste")
    assert thumbnails(page, "#attachments img") == [[3, 2], [5, 4]]
    send(page, "describe these")
    wait_answered(page)
    assert last_answer(page).locator(".markdown").inner_text().strip() == f"describe these{MARKERS}"
    turn = page.locator(".message.user").last
    assert turn.locator(".bubble").inner_text() == "describe these"
    assert thumbnails(page, ".message.user .message-images img") == [[3, 2], [5, 4]]
    assert page.locator("#attachments").is_hidden() and page.locator("#attachments img").count() == 0
    # The stored conversation holds the images; reopened from the server, the turn shows them again.
    conversation = page.evaluate("() => location.hash.slice(1)")
    items = httpx.get(f"{server.v1}/conversations/{conversation}/items", params={"order": "asc"}).json()["data"]
    content = items[0]["content"]
    assert [part["type"] for part in content] == ["input_text", "input_image", "input_image"]
    assert content[1]["image_url"] == "data:image/png;base64," + base64.b64encode(png(3, 2)).decode()
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    page.wait_for_selector(".message.user .message-images img")
    assert thumbnails(page, ".message.user .message-images img") == [[3, 2], [5, 4]]


def test_a_dropped_image_alone_is_a_message(page):
    dispatch_files(page, "drop", "wide.png", png(5, 4))
    page.wait_for_selector("#attachments img")
    page.press("#prompt", "Enter")  # no text: the image is the message
    wait_answered(page)
    assert last_answer(page).locator(".markdown").inner_text().strip() == "[image 5x4]"
    assert page.locator(".message.user .bubble").count() == 0
    assert page.locator(".conversation-open", has_text="Image").count() >= 1  # its title, wanting text


def test_thumbnails_are_removable_and_files_refused_clearly(page):
    attach_two(page, "drop")
    page.click("#attachments .attachment-remove >> nth=0")
    assert thumbnails(page, "#attachments img") == [[5, 4]]
    assert page.evaluate("() => document.activeElement.id") == "prompt"
    pick(page, "notes.txt", b"not a picture", "text/plain")
    page.locator("#error-banner").wait_for(state="visible")
    assert "notes.txt is not an image (text/plain)" in page.inner_text("#error-banner")
    dispatch_files(page, "drop", "huge.png", b"", size=9 * 1024 * 1024)
    page.wait_for_function("() => /huge.png is too large/.test(document.getElementById('error-banner').textContent)")
    assert "at most 8.0 MiB" in page.inner_text("#error-banner")
    assert page.locator("#attachments img").count() == 1  # neither was attached; the first one stays
    page.click("#attachments .attachment-remove")
    assert page.locator("#attachments").is_hidden()


def test_show_request_with_images_runs_in_curl_python_and_javascript(page, server, tmp_path):
    attach_two(page, "paste")
    send(page, "describe these")
    wait_answered(page)
    last_answer(page).locator(".answer-footer button", has_text="Request").click()
    curl = page.inner_text("#request-code")
    data_url = "data:image/png;base64," + base64.b64encode(png(5, 4)).decode()
    assert curl_body(curl)["input"][0]["content"][2] == {"type": "input_image", "image_url": data_url}
    env = {**os.environ, "ROSTRA_API_KEY": "unused"}
    (tmp_path / "turn.sh").write_text(curl)
    ran = subprocess.run(["bash", str(tmp_path / "turn.sh")], capture_output=True, text=True, timeout=60)
    assert "response.completed" in ran.stdout and MARKERS in ran.stdout.replace("\\n", "")
    page.click("[role=tab][data-lang=python]")
    (tmp_path / "turn.py").write_text(page.inner_text("#request-code"))
    ran = subprocess.run([sys.executable, str(tmp_path / "turn.py")], capture_output=True, text=True, timeout=60,
                         env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"describe these{MARKERS}"
    page.click("[role=tab][data-lang=javascript]")
    (tmp_path / "node_modules").symlink_to(node_client("openai-node") / "node_modules")
    (tmp_path / "turn.mjs").write_text(page.inner_text("#request-code"))
    ran = subprocess.run(["node", str(tmp_path / "turn.mjs")], capture_output=True, text=True, timeout=60, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"describe these{MARKERS}"


def test_images_by_keyboard_in_a_phone_sized_window(browser, server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    page.focus("#prompt")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.activeElement.id") == "attach"
    open_picker_by_keyboard(page).set_files(files=[{"name": "wide.png", "mimeType": "image/png", "buffer": png(5, 4)}])
    page.wait_for_selector("#attachments img")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    send(page, "look")
    wait_answered(page)
    assert last_answer(page).locator(".markdown").inner_text().strip() == "look[image 5x4]"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    context.close()


def open_picker_by_keyboard(page):
    """Enter on the focused attach button opens the file picker. Headless Chromium in a mobile context now and
    then opens no file chooser for the Enter (1 run in 3 here, the button focused): a second Enter, the focus
    unchanged, is what a user would press too."""
    for attempt in range(3):
        try:
            with page.expect_file_chooser(timeout=5_000) as chooser:
                page.keyboard.press("Enter")
            return chooser.value
        except PlaywrightTimeout:
            assert page.evaluate("() => document.activeElement.id") == "attach"
    raise AssertionError("Enter on the attach button never opened the file picker")


def test_a_model_that_cannot_see_shows_the_servers_400(browser, real_server):
    context = browser.new_context()
    context.set_default_timeout(120_000)
    page = context.new_page()
    page.goto(real_server.base_url + "/")
    page.wait_for_selector("body[data-ready=true]")
    pick(page, "small.png", png(3, 2))
    send(page, "what is this?")
    problem = last_answer(page).locator(".answer-error")
    problem.wait_for()
    assert "does not take images" in problem.inner_text() and "content[1])" in problem.inner_text()
    page.fill("#prompt", "still serving?")  # the server keeps serving, and the page with it
    page.press("#prompt", "Enter")
    wait_answered(page)
    context.close()
