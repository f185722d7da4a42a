"""instructor's Mode.RESPONSES_TOOLS, unmodified: one extraction from `rostra serve` (argv: base URL, model).

Run by tests/test_clients_instructor.py in this directory's own venv; prints the extracted object as JSON."""

import sys

import instructor
from openai import OpenAI
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


client = instructor.from_openai(OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0),
                                mode=instructor.Mode.RESPONSES_TOOLS)
person = client.responses.create(model=sys.argv[2], input="Extract: Ada is 36 years old.", response_model=Person,
                                 max_retries=0)
print(person.model_dump_json())
