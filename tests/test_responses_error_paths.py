"""A Responses 400 about an input item names it by its place in the request's `input` (`input[i]`), and a content
part by its place in the item (`input[i].content[j]`, a call output's `input[i].output[j]`), as Chat names
`messages[i].content[j]`; an item of the stored conversation a request continues is in no list of the request: it is
named by its id. In-process, scripted engine."""

from __future__ import annotations

import pytest

from harness import MODEL, served
from wire import check_error

BAD_PNG = "data:image/png;base64,@@"


def respond(http, items: list, **body):
    return http.post("/v1/responses", json={"model": MODEL, "input": items, **body})


@pytest.fixture
def http(tmp_path):
    with served(tmp_path, [{"match": "", "output": "Fine."}]) as client:
        yield client


def test_a_bad_part_is_named_by_its_item_and_part_index(http):
    items = [{"role": "developer", "content": "be brief"},
             {"role": "user", "content": [{"type": "input_text", "text": "x"},
                                          {"type": "input_image", "image_url": BAD_PNG}]}]
    assert check_error(respond(http, items), 400, "input[1].content[1]")["code"] == "invalid_base64"


def test_an_image_in_an_assistant_message_names_that_part(http):
    items = [{"role": "user", "content": "hi"},
             {"role": "assistant", "content": [{"type": "input_image", "image_url": BAD_PNG}]}]
    check_error(respond(http, items), 400, "input[1].content[0]")


def test_a_part_without_its_url_names_the_part(http):
    check_error(respond(http, [{"role": "user", "content": [{"type": "input_image"}]}]), 400, "input[0].content[0]")


def test_a_call_outputs_image_is_named_in_its_output_list(http):
    items = [{"role": "user", "content": "look"},
             {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1",
              "output": [{"type": "input_text", "text": "here"}, {"type": "input_image", "image_url": BAD_PNG}]}]
    check_error(respond(http, items), 400, "input[2].output[1]")


def test_an_item_reference_is_named_where_it_stands_in_input(http):
    first = respond(http, [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    assert first.status_code == 200, first.text
    stored = http.get(f"/v1/responses/{first.json()['id']}/input_items").json()["data"][0]["id"]
    items = [{"type": "item_reference", "id": stored},
             {"role": "user", "content": [{"type": "input_image", "image_url": BAD_PNG}]}]
    check_error(respond(http, items), 400, "input[1].content[0]")


def test_a_continued_conversations_new_items_count_from_the_requests_own_input(http):
    first = respond(http, [{"role": "user", "content": "hi"}])
    assert first.status_code == 200, first.text
    items = [{"role": "user", "content": [{"type": "input_image", "image_url": BAD_PNG}]}]
    check_error(respond(http, items, previous_response_id=first.json()["id"]), 400, "input[0].content[0]")


def test_a_template_refusing_the_conversation_names_input(tmp_path):
    """The chat template's own refusal is about the whole list: on Responses that list is `input` (Chat's
    `messages`)."""
    refusing = "{{ raise_exception('roles must alternate') }}"
    with served(tmp_path, [{"match": "", "output": "Fine."}], chat_template=refusing) as http:
        error = check_error(respond(http, [{"role": "user", "content": "hi"}]), 400, "input")
        assert "roles must alternate" in error["message"]
        chat = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        check_error(chat, 400, "messages")
