"""OpenAI's usage API for completions (`GET /v1/organization/usage/completions`): what each API key used, per model,
in time buckets, from the usage store (rostra/store/usage_store.py). An admin key (or a server without keys) sees
every key's usage; any other key sees its own."""
