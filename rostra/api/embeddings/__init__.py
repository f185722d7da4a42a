"""OpenAI's Embeddings API, `POST /v1/embeddings`: request model (request.py), service (service.py), routes
(routes.py). One served model per server: an embedding model (`--task embed`, or detected from the checkpoint)
answers here, a generation model answers a 400 naming the flag."""
