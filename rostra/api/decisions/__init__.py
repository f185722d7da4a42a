"""OpenAI's Decisions API, `POST /v1/decisions`: predicate, choice and score questions about an input, answered with
probabilities read from the served model's own next-token distribution (nothing is sampled). The request model
(request.py) mirrors the openai SDK's `DecisionCreateParams`; each question becomes one prompt through the model's
chat template (prompts.py), whose answer labels are scored by the engine (`Engine.score_continuations`) and
normalized into the `Decision` object (service.py)."""
