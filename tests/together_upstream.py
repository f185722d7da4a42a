"""An upstream that streams as Together's API does: each chunk's `logprobs` a bare number (the piece's
logprob), and vLLM's `stop_reason` on the finishing chunk. A plain HTTP server on loopback, in a thread:
it stands for a vendor's service, which the tests cannot reach. It records the bodies it was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "together-model"
PIECES = (" the", " sea", " is", " calm")
STOP_TOKEN = 7  # the stop_reason it reports: as if a stop_token_ids token ended the text


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
                for piece in PIECES:
                    choice = ({"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece})
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
