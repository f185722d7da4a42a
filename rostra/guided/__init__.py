"""Structured outputs: what the request asks for -> a decoding constraint for the engine."""
