"""A prompt format's own ends of the model's turn, as stops of every request it renders.

gpt-oss ends a turn with `<|call|>` (a tool call waits for its result) or `<|return|>` (the answer is done):
the harmony renderer lists them (`stop_texts`), as OpenAI's library gives them for assistant actions. Engines
often stop there already (the checkpoint's end-of-generation tokens); as stop tokens of the request they hold on
every engine, whatever the checkpoint declares."""

from __future__ import annotations

import dataclasses
from weakref import WeakKeyDictionary

from rostra.engines.base import Engine
from rostra.prompt.chat_template import PromptRenderer
from rostra.turn import Turn

_IDS: WeakKeyDictionary[Engine, tuple[int, ...]] = WeakKeyDictionary()  # the stop texts' ids, per engine


async def with_template_stops(turn: Turn, renderer: PromptRenderer, engine: Engine) -> Turn:
    """The turn with its prompt format's own stops added: the harmony renderer's stop tokens, and the stop
    strings a chat template declares (tabbyAPI's template metadata: prompt/template_metadata.py)."""
    sampling = turn.sampling
    ids = await _stop_token_ids(renderer, engine)
    if ids:
        sampling = dataclasses.replace(sampling, stop_token_ids=tuple(dict.fromkeys([*sampling.stop_token_ids, *ids])))
    strings: tuple[str, ...] = getattr(renderer, "stop_strings", ())
    if strings:
        sampling = dataclasses.replace(sampling, stop=tuple(dict.fromkeys([*sampling.stop, *strings])))
    return turn if sampling is turn.sampling else dataclasses.replace(turn, sampling=sampling)


async def _stop_token_ids(renderer: PromptRenderer, engine: Engine) -> tuple[int, ...]:
    texts: tuple[str, ...] = getattr(renderer, "stop_texts", ())
    if not texts:
        return ()
    ids = _IDS.get(engine)
    if ids is None:
        found = [await engine.tokenize(text, add_special=False) for text in texts if text in engine.special_texts]
        ids = _IDS[engine] = tuple(tokens[0] for tokens in found if len(tokens) == 1)
    return ids
