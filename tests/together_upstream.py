"""An upstream that streams as Together's API does: each chunk's `logprobs` a bare number (the piece's
logprob), and vLLM's `stop_reason` on the finishing chunk; asked for `prompt_logprobs` with a prompt of token
ids, the first chunk's choice carries them in vLLM's shape (`prompt_scores`; a text prompt or a chat: as if it
were the tokens 1, 2, 3; a chat's on the chunk itself). A plain HTTP server on loopback, in a thread:
it stands for a vendor's service, which the tests cannot reach. It records the bodies it was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "together-model"
PIECES = (" the", " sea", " is", " calm")
STOP_TOKEN = 7  # the stop_reason it reports: as if a stop_token_ids token ended the text


PROMPT_TOKEN_LOGPROB = -0.5  # each prompt token's, ranked second after token 99 (-0.1)


def prompt_scores(token_ids: list[int]) -> list:
    """vLLM's prompt_logprobs with 1 alternative: each token's own entry and token 99's, which ranks first."""
    return [None, *({str(token): {"logprob": PROMPT_TOKEN_LOGPROB, "rank": 2, "decoded_token": "?"},
                     "99": {"logprob": -0.1, "rank": 1, "decoded_token": "?"}} for token in token_ids[1:])]


class TogetherUpstream:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 2048}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                upstream.bodies.append(body)
                chat = self.path.endswith("/chat/completions")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                scored = body.get("prompt_logprobs") is not None
                prompt = body.get("prompt") if isinstance(body.get("prompt"), list) else [1, 2, 3]
                for number, piece in enumerate(PIECES):
                    choice = ({"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece})
                    if number == 0 and scored and not chat:
                        choice["prompt_logprobs"] = prompt_scores(prompt)
                    if number == 0 and scored and chat:
                        self._event({"id": "t-1", "choices": [], "prompt_logprobs": prompt_scores(prompt)})
                    self._event({"id": "t-1", "choices": [{**choice, "logprobs": -0.25, "finish_reason": None}]})
                end = {"index": 0, "finish_reason": "stop", "stop_reason": STOP_TOKEN, "logprobs": None,
                       **({"delta": {}} if chat else {"text": ""})}
                self._event({"id": "t-1", "choices": [end]})
                self._event({"id": "t-1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                                                                   "total_tokens": 7}})
                self.wfile.write(b"data: [DONE]\n\n")

            def _event(self, data: dict) -> None:
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def _json(self, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.v1 = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
