"""How a job's semantic events become an API's output: the one stream loop every API runs (`rendered`), its fold into
the non-streamed answer (`folded`), and the chunk-shaped renderer Chat and Completions share (GenerationStream)."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncGenerator, Protocol

from rostra.parsing.events import Event, Finish
from rostra.serving.job import Job


# What stopped a choice, on its finishing chunk and in the response: vLLM's and tabbyAPI's names.
STOP_FIELDS = ("stop_reason", "stop_str")


def stop_fields(finish: Finish) -> dict[str, int | str | None]:
    """vLLM's `stop_reason` (the stop string, or the stop token's id; null after end of generation or
    the length limit) and tabbyAPI's `stop_str` (the stop string, or the stop token's text)."""
    return {"stop_reason": finish.stop_reason, "stop_str": finish.stop_str}


def token_text(data: bytes) -> str:
    """A token's text for logprobs; a token holding part of a character shows U+FFFD."""
    return data.decode("utf-8", errors="replace")


def token_label(token_id: int, data: bytes, as_id: bool) -> str:
    """A token as logprobs name it: its text, or vLLM's `token_id:N` (return_tokens_as_token_ids)."""
    return f"token_id:{token_id}" if as_id else token_text(data)


class EventRenderer(Protocol):
    """An API's renderer (Chat chunks, Completions chunks, Messages events, Responses events): what a stream sends
    at its start, for each semantic event and at its end, each folded as it goes into the answer `result()`
    returns, so a non-streamed answer is the fold of the very events a stream sends."""

    def start(self) -> list[dict[str, Any]]: ...

    def add(self, index: int, event: Event) -> list[dict[str, Any]]: ...

    def end(self) -> list[dict[str, Any]]: ...

    def result(self) -> dict[str, Any]: ...


async def rendered(events: AsyncGenerator[tuple[int, Event], None],
                   renderer: EventRenderer) -> AsyncGenerator[dict[str, Any], None]:
    """The one stream loop of every API: the renderer's output for the choices' merged events.
    aclosing: a client that leaves closes this stream, and with it the generations, at once."""
    for out in renderer.start():
        yield out
    async with aclosing(events):
        async for index, event in events:
            for out in renderer.add(index, event):
                yield out
    for out in renderer.end():
        yield out


async def folded(events: AsyncGenerator[tuple[int, Event], None], renderer: EventRenderer) -> dict[str, Any]:
    """The non-streamed answer: the same loop, its output folded by the renderer instead of sent."""
    async with aclosing(rendered(events, renderer)) as outputs:
        async for _ in outputs:
            pass
    return renderer.result()


class GenerationStream:
    """One request's output, streamed or not (an EventRenderer): `add` turns a semantic event into the chunk a
    stream sends and folds that same chunk into the state `response()` returns, so a non-streamed response is
    the fold of the stream by construction. Subclasses write the event -> chunk mapping (`render`) and the fold
    of one chunk's choice (`fold_choice`) for their API, once."""

    object_name: str
    # Chat chunks carry "usage": null until the last one when usage is asked for; the spec
    # has no null usage for Completions chunks, so they leave it out.
    null_usage: bool

    def __init__(self, job: Job):
        self.job = job
        self.options = job.options

    def start(self) -> list[dict[str, Any]]:
        chunks = self.opening()
        for chunk in chunks:
            for choice in chunk["choices"]:
                self.fold_choice(choice)
        return chunks

    def opening(self) -> list[dict[str, Any]]:
        """The chunks sent before any event (Chat: each choice's role)."""
        return []

    def add(self, index: int, event: Event) -> list[dict[str, Any]]:
        chunk = self.render(index, event)
        if chunk is None:
            return []
        for choice in chunk["choices"]:
            self.fold_choice(choice)
        return [chunk]

    def end(self) -> list[dict[str, Any]]:
        """After the last event: the usage chunk, when asked for."""
        usage_chunk = self.usage_chunk()
        return [] if usage_chunk is None else [usage_chunk]

    def result(self) -> dict[str, Any]:
        return self.response()

    def render(self, index: int, event: Event) -> dict[str, Any] | None:
        raise NotImplementedError

    def fold_choice(self, choice: dict[str, Any]) -> None:
        raise NotImplementedError

    def response(self) -> dict[str, Any]:
        raise NotImplementedError

    def chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = self.job.envelope(self.object_name, choices)
        if self.options.continuous_usage:
            chunk["usage"] = self.job.stats.usage(running=True, choice=choices[0]["index"] if len(choices) == 1 else None)
        elif self.options.include_usage and self.null_usage:
            chunk["usage"] = None
        return chunk

    def usage_chunk(self) -> dict[str, Any] | None:
        if not self.options.include_usage:
            return None
        return self.job.response(self.object_name, [])
