"""The API front ends, one package each: its request models, its stream state (which renders the pipeline's
semantic events into the API's wire format and folds the same events into the non-streamed object), its service
and its routes (`router`, included by rostra/server/routes/__init__.py).

Adding an API is adding a package here; nothing in the shared pipeline (prompt, engines, decoder, parsers) knows
which API asked.
"""
