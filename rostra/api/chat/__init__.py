"""OpenAI's Chat Completions API, `POST /v1/chat/completions`: its routes (routes.py) and what only Chat reads
(files.py: `file` content parts read into text). Its request model is rostra/protocol/chat.py (the wire format
the pipeline's relays and the Responses API's chat turns share) and its service the shared pipeline's ChatService
(rostra/serving/chat.py), which Messages, Responses and Decisions generate through too."""
