"""POST /v1/decisions through the official SDK (`client.decisions.create`) on the scripted engine: the shapes the
SDK's `Decision` type reads, the answers the script gives (the scripted engine is certain of its line's answer, so
its label gets all but e^-20 of the probability), the input's forms, and the 400s in OpenAI's envelope."""

from __future__ import annotations

import math

import openai
import pytest
from openai import OpenAI

from harness import BASE_URL, MODEL, served

SCRIPT = [
    {"match": r"\[image 24x16\]", "output": "Yes"},  # the scripted engine's text for a 24x16 image
    {"match": "charged more than once", "output": "Yes"},
    {"match": "Classify the support ticket", "output": "billing"},
    {"match": "How urgent", "output": "high"},
    {"match": "Is the answer a boolean", "output": "false"},
    {"match": "weather tool", "output": "No"},
]
TICKET = "I was charged twice for the same subscription renewal."


@pytest.fixture
def client(tmp_path):
    with served(tmp_path, SCRIPT) as http:
        yield OpenAI(base_url=f"{BASE_URL}/v1", api_key="unused", max_retries=0, http_client=http)


def test_predicate_choice_and_score_in_question_order(client):
    decision = client.decisions.create(model=MODEL, input=TICKET, questions=[
        {"type": "predicate", "name": "duplicate", "instructions": "The customer was charged more than once."},
        {"type": "choice", "name": "category", "instructions": "Classify the support ticket.",
         "choices": [{"value": "technical", "description": "Software errors"}, {"value": "billing"}]},
        {"type": "score", "instructions": "How urgent is it?",
         "levels": [{"label": "low"}, {"label": "medium"}, {"label": "high"}]},
    ])
    duplicate, category, urgency = decision.answers
    assert decision.model == MODEL
    assert duplicate.type == "predicate" and duplicate.name == "duplicate"
    assert duplicate.probability == pytest.approx(1.0, abs=1e-6)
    assert category.type == "choice" and category.choice == "billing" and category.name == "category"
    assert [p.value for p in category.probabilities] == ["technical", "billing"]
    assert math.fsum(p.probability for p in category.probabilities) == pytest.approx(1.0)
    assert category.confidence == category.probabilities[1].probability
    assert urgency.type == "score" and urgency.name is None
    assert [(p.value, p.label) for p in urgency.probabilities] == [(0, "low"), (1, "medium"), (2, "high")]
    assert urgency.score == pytest.approx(2.0, abs=1e-6)
    usage = decision.usage
    assert usage.input_tokens > 0 and usage.output_tokens == 0 and usage.total_tokens == usage.input_tokens


def test_unscripted_answer_is_even_and_predicate_no(client):
    decision = client.decisions.create(model=MODEL, input="Nothing here.", questions=[
        {"type": "choice", "instructions": "Pick one.", "choices": [{"value": "left"}, {"value": "right"}]},
        {"type": "predicate", "instructions": "It mentions the weather tool."},
    ])
    pick, weather = decision.answers
    # No line answers the first: both labels are off the script, each equally unlikely.
    assert [p.probability for p in pick.probabilities] == pytest.approx([0.5, 0.5])
    assert weather.probability == pytest.approx(0.0, abs=1e-6)


def test_boolean_choices_keep_their_type(client):
    decision = client.decisions.create(model=MODEL, input="x", questions=[
        {"type": "choice", "instructions": "Is the answer a boolean?", "choices": [{"value": True}, {"value": False}]},
    ])
    (answer,) = decision.answers
    assert answer.choice is False and [p.value for p in answer.probabilities] == [True, False]


def test_message_input_with_a_tool_call_and_its_output(client):
    decision = client.decisions.create(model=MODEL, questions=[
        {"type": "predicate", "instructions": [{"type": "input_text", "text": "The weather tool was called."}]}],
        input=[{"role": "system", "content": "You help."},
               {"role": "user", "content": [{"type": "input_text", "text": "Weather?"},
                                            {"type": "input_json", "data": {"city": "Paris"}}]},
               {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
               {"role": "assistant", "content": "It is sunny.", "phase": "final_answer"}])
    assert decision.answers[0].probability == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("questions, param", [
    ([], "questions"),
    ([{"type": "choice", "instructions": "x", "choices": [{"value": "a"}]}], "questions[0].choices"),
    ([{"type": "choice", "instructions": "x", "choices": [{"value": "a"}, {"value": "a"}]}],
     "questions[0].choices[1]"),
    ([{"type": "score", "instructions": "x", "levels": [{"label": "only"}]}], "questions[0].levels"),
    ([{"type": "predicate"}], "questions[0].instructions"),
    ([{"type": "guess", "instructions": "x"}], "questions[0]"),
])
def test_bad_questions_are_400s_naming_the_field(client, questions, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.decisions.create(model=MODEL, input="x", questions=questions)
    error = caught.value.body
    assert caught.value.status_code == 400 and error["type"] == "invalid_request_error"
    assert error["param"] is not None and error["param"].startswith(param)


def test_a_tool_output_without_its_call_and_an_unknown_model(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.decisions.create(model=MODEL, questions=[{"type": "predicate", "instructions": "x"}],
                                input=[{"type": "function_call_output", "call_id": "nope", "output": "x"}])
    assert caught.value.body["param"] == "input[0].call_id"
    with pytest.raises(openai.NotFoundError):
        client.decisions.create(model="other", input="x", questions=[{"type": "predicate", "instructions": "x"}])
    with pytest.raises(openai.BadRequestError) as caught:
        client.decisions.create(model=MODEL, input="x", questions=[{"type": "predicate", "instructions": "x"}],
                                extra_body={"temperature": 0})
    assert caught.value.body["param"] == "temperature"


def test_an_image_in_the_input_reaches_the_prompt(client):
    """The scripted engine sees an image as its placeholder text: its script answers Yes only when the question's
    prompt holds the image."""
    from images import png_data_url

    decision = client.decisions.create(model=MODEL, questions=[
        {"type": "predicate", "instructions": "The picture is small."}],
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Look:"},
                                            {"type": "input_image", "image_url": png_data_url(24, 16)}]}])
    assert decision.answers[0].probability == pytest.approx(1.0, abs=1e-6)
