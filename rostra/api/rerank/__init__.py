"""Reranking: `POST /v1/rerank` and `/v2/rerank` (the Cohere / Jina shape that vLLM, llama.cpp's server and TEI
clients send) and vLLM's `POST /v1/score` (`text_1` / `text_2`): request models (request.py), service
(service.py), routes (routes.py). A reranker (`--task rerank`, or detected from the checkpoint) answers here;
any other model answers a 400 naming the flag."""
