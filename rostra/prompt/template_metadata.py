"""What a chat template says about itself: tabbyAPI's template metadata.

tabbyAPI's templates declare the strings that end the model's turn at their top level,
`{%- set stop_strings = ["<|im_end|>", "<|eot_id|>"] -%}`, for models whose checkpoint does not stop there by
itself (an end-of-turn that is not the tokenizer's EOS). They are read from the template's syntax tree, never by
running it: only a literal list (or one string) of non-empty strings at the top level counts.
"""

from __future__ import annotations

from jinja2 import Environment, nodes

STOP_STRINGS = "stop_strings"  # tabbyAPI's variable name


def template_stop_strings(env: Environment, source: str) -> tuple[str, ...]:
    for node in env.parse(source).body:
        if not (isinstance(node, nodes.Assign) and isinstance(node.target, nodes.Name)
                and node.target.name == STOP_STRINGS):
            continue
        value = node.node
        items: list[nodes.Node] = list(value.items) if isinstance(value, (nodes.List, nodes.Tuple)) else [value]
        texts = [item.value for item in items if isinstance(item, nodes.Const) and isinstance(item.value, str)]
        if len(texts) == len(items) and all(texts):
            return tuple(dict.fromkeys(texts))
    return ()
