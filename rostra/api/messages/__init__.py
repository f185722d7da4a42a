"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens), the front end Claude Code and the
`anthropic` SDKs speak: models.py (the request bodies), history.py (their prompt as chat messages),
stream.py (semantic events -> Anthropic's stream events, folded into the Message), service.py, routes.py."""
