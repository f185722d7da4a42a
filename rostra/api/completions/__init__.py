"""OpenAI's (legacy) Completions API, `POST /v1/completions`: its service (service.py: prompts, echo, legacy
logprobs, best_of) and routes (routes.py). A model that generates gets one CompletionService among its services
(rostra/server/app.py builds it); its request model is rostra/protocol/completions.py."""
