"""Images in prompts: read from data URLs or fetched from http(s) URLs by rostra itself (never by the engine),
decoded off the event loop, checked against limits, and handed to the engine as sent (a plain PNG or JPEG) or
re-encoded as PNG.

- limits.py: the limits (bytes, pixels, count, fetch time, redirects) and who may be fetched from.
- data_url.py: `data:` URLs -> bytes (strict base64, an image media type).
- decode.py: bytes -> a checked, upright RGB image an engine reads (Pillow), in a worker thread.
- addresses.py: which addresses are public (the only ones fetched from unless allowed).
- fetch.py: the guarded http(s) fetcher.
- loader.py: one request's image sources -> PromptImages, each error a 400 naming its part.
"""
