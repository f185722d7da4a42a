"""IBM Granite 3.2+ thinking: "Here is my thought process:" … "Here is my response:" …"""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser


class GraniteReasoningParser(ReasoningParser):
    name = "granite"
    start = "Here is my thought process:"
    end = "Here is my response:"
