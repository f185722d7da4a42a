"""The Responses API (and the Conversations API its responses read and extend), one package:

- models.py: the request bodies; items.py and tools.py: input items and tools, typed (one discriminated union
  each: adding an item or tool type is adding a model there); typed.py: how those unions are parsed into 400s.
- service.py: a request -> the typed turn of each model turn (to_chat.py) -> semantic events -> the response.
- render.py: semantic events -> Responses stream events and the response object they build (MCP items by
  mcp/render.py, a part it holds).
- runs.py: the runs of stored responses: leases, background tasks (bounded; failed, saying why, at shutdown),
  followers, cancel, delete; event_log.py: their events on the way to the store; recovery.py: a response whose
  runner died, settled from its logged events (its partial item incomplete).
- mcp/: MCP servers (client.py), which a request may use (tools.py), the tool loop (loop.py), their items
  (render.py).
- ws_connection.py: the WebSocket mode on /v1/responses (transports.py routes it): one connection's lanes, its
  cache of recent responses, its turns through the gate and service.py; ws_events.py its wire, ws_steering.py
  `response.steer`.
- conversations.py: the Conversations API's service; routes.py: both APIs' routes (`router`); objects.py: ids and
  snapshots of the JSON objects the wing makes.
"""
