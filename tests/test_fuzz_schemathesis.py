"""Fuzz the server with Schemathesis against OpenAI's spec: never a 5xx, and every documented answer conforms.

Requests are generated from tests/spec/openapi.json for createChatCompletion, createCompletion,
createResponse and createConversation: valid ones (positive) and ones that break the spec on purpose
(negative). Most positive bodies of the first three get `model: "scripted"` so that they reach the engine
instead of stopping at the 404 for an unknown model. Every answer must not be a server error; a
non-streaming answer whose status the spec documents (200, 429) must match its schema. Streamed (SSE)
answers are held to "no 5xx" only.

The scripted engine answers at once, so the whole run takes seconds. ROSTRA_FUZZ_EXAMPLES raises the number
of examples per operation and mode for a longer local run; ROSTRA_FUZZ_SEED makes a run reproducible.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

import pytest
import requests

import schemathesis  # noqa: E402  (a test dependency: pyproject's [test] extra)

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

from conftest import SCRIPTED_MODEL  # noqa: E402
from spec import spec_as_served  # noqa: E402

OPERATIONS = ["createChatCompletion", "createCompletion", "createResponse", "createConversation"]
TAKES_A_MODEL = {"createChatCompletion", "createCompletion", "createResponse"}
EXAMPLES = int(os.environ.get("ROSTRA_FUZZ_EXAMPLES", "50"))
SEED = os.environ.get("ROSTRA_FUZZ_SEED")
REQUEST_TIMEOUT = 30


@lru_cache(maxsize=1)
def _schema():
    # Read as tests/spec.py reads it: `nullable: true` as "or null", a Response's usage null until finished.
    return schemathesis.openapi.from_dict(spec_as_served())


UNTOUCHED, SERVED_MODEL, TIDIED = 0, 1, 2
# What the server needs that the spec leaves optional, for the "tidied" bodies that should reach the engine.
REQUIRED_TEXT = {"createCompletion": "prompt", "createResponse": "input"}


def _prepare(case, operation_id: str, treatment: int) -> bool:
    """Apply a treatment to the body; whether the answer should be a stream.

    SERVED_MODEL points the body at the served model. TIDIED also drops top-level nulls, writes integral
    floats (`16.0`) as integers and fills an empty prompt/input: spec-valid values the server may reject with
    a 400, so that more bodies get through to the engine and to a 200 to check against the spec.
    """
    body = case.body
    if not isinstance(body, dict):
        return False
    if treatment >= SERVED_MODEL and operation_id in TAKES_A_MODEL:
        body["model"] = SCRIPTED_MODEL
    if treatment == TIDIED:
        for key, value in list(body.items()):
            if value is None:
                del body[key]
            elif isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                body[key] = int(value)
        field = REQUIRED_TEXT.get(operation_id)
        if field is not None and not body.get(field):
            body[field] = "Say hello."
    return body.get("stream") is True


def _describe(case, response, error: BaseException) -> str:
    try:
        body = json.dumps(case.body, ensure_ascii=False)
    except (TypeError, ValueError):
        body = repr(case.body)
    text = response.text if response is not None else ""
    status = response.status_code if response is not None else "no response"
    return (f"{case.method} {case.path} -> {status}\n  request: {body[:2000]}\n  response: {text[:1500]}\n"
            f"  failure: {str(error).strip()[:1500]}")


def _settings(max_examples: int):
    return settings(max_examples=max_examples, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_fuzz_spec_operation(scripted_server, operation_id, mode):
    operation = _schema().find_operation_by_id(operation_id)
    # Positive bodies: a quarter as generated, a quarter with the served model, half tidied as well; negative
    # ones: as generated or with the served model. The favoured choice goes first, as Hypothesis leans to it.
    treatments = (st.sampled_from([TIDIED, SERVED_MODEL, TIDIED, UNTOUCHED]) if mode.is_positive
                  else st.sampled_from([SERVED_MODEL, UNTOUCHED]))
    failures: dict[str, str] = {}
    session = requests.Session()
    seen = {"cases": 0, "statuses": {}, "streams": 0}

    @_settings(EXAMPLES)
    @given(case=operation.as_strategy(generation_mode=mode), treatment=treatments)
    def run(case, treatment):
        streaming = _prepare(case, operation_id, treatment)
        # Streams are SSE, not the JSON objects the spec's 200 schemas describe: only "no 5xx" for them.
        seen["streams"] += streaming
        checks = [not_a_server_error] if streaming else [not_a_server_error, response_schema_conformance]
        response = None
        try:
            response = case.call(base_url=f"{scripted_server.base_url}/v1", session=session,
                                 timeout=REQUEST_TIMEOUT)
            seen["cases"] += 1
            seen["statuses"][response.status_code] = seen["statuses"].get(response.status_code, 0) + 1
            case.validate_response(response, checks=checks)
        except (AssertionError, BaseExceptionGroup, requests.RequestException) as error:
            # Keep going: one report with every distinct failure, not the first one alone.
            key = f"{type(error).__name__}:{getattr(response, 'status_code', None)}:{str(error).strip()[:200]}"
            failures.setdefault(key, _describe(case, response, error))

    if SEED is not None:
        run = seed(int(SEED))(run)
    try:
        run()
    finally:
        session.close()
    print(f"{operation_id} {mode}: {seen['cases']} requests, statuses {seen['statuses']}, "
          f"{seen['streams']} streamed")
    assert not failures, (
        f"{len(failures)} distinct failure(s) fuzzing {operation_id} ({mode}); server log: "
        f"{scripted_server.log_path}\n\n" + "\n\n".join(failures.values()))
