"""What the model reads in a failed MCP or hosted tool call's output (rostra/api/responses/mcp/client.py's
error_text), for every MCPToolCallError shape and a stored item's plain-string error."""

from __future__ import annotations

import pytest

from rostra.api.responses.mcp.client import error_text


@pytest.mark.parametrize("error, text", [
    ({"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "division by zero"},
                                                      {"type": "text", "text": "at line 2"}]},
     "Error: division by zero\nat line 2"),
    ({"type": "mcp_tool_execution_error", "content": []}, "Error: the tool failed"),
    ({"type": "mcp_tool_execution_error", "content": None}, "Error: the tool failed"),
    ({"type": "http_error", "code": 502, "message": "Bad Gateway"}, "Error: Bad Gateway"),
    ({"type": "mcp_protocol_error", "code": -32601}, "Error: the tool call failed"),
    ("ConnectError: refused", "Error: ConnectError: refused"),
])
def test_error_text(error, text):
    assert error_text(error) == text
