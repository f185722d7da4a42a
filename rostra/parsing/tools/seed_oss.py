"""seed_oss: the tool-call markup of ByteDance Seed-OSS (its chat template, llama.cpp
models/templates/ByteDance-Seed-OSS.jinja).

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Oslo</parameter>
    <parameter=days>3</parameter>
    </function>
    </seed:tool_call>

Qwen3-Coder's tags inside Seed's own block markers. The template writes a value with no newline around it;
one newline on either side is taken as markup all the same, as Seed-OSS's reference parser (vLLM seed_oss)
does. Values convert by the parameter's schema type; calls stream from their <function=…> on (tagged_calls).
"""

from __future__ import annotations

from rostra.parsing.tools.tagged_calls import QWEN3_CODER_TAGS, TaggedCallsToolParser


class SeedOssToolParser(TaggedCallsToolParser):
    name = "seed_oss"
    reasoning = "seed_oss"
    start = "<seed:tool_call>"
    end = "</seed:tool_call>"
    tags = QWEN3_CODER_TAGS
