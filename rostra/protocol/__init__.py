"""Request models for each API (pydantic), validated strictly; responses are built as plain
dicts by the renderers and checked against the OpenAPI spec in the tests."""
