"""The HTTP plumbing every API builds on, below the APIs (rostra/api/*, rostra/server/routes/) and above the model
lifecycle (rostra/models/): SSE with disconnect detection (sse.py), request bodies (request_body.py), the one serving
path of a generation (generation_endpoint.py) and the gate of all other engine work (gate.py), admission, the
middleware and the error envelopes each API registers (envelopes.py), metrics, and the context routes reach
(context.py). Nothing here imports an API: what an API needs from it comes through typed accessors."""
