"""Never lose a call, for every registered tool parser (rostra/parsing/tools REGISTRY: a parser added there is
checked here as soon as its sample is in test_truncation_matrix.FORMATS, which that file already insists on).

The bug class the peers' trackers report most (issue 43): a malformed call that drops the whole call or aborts
the stream, and arguments dropped when one delta carries several tokens (speculative decoding, MTP). So, for each
parser, plain and layered as the server runs it:

- every grouping of a real call output into deltas (each single cut, deltas of 1 to 16 characters at every phase,
  and the output's real tokens of the embedded model grouped 1 to 8 per delta) gives the same calls and text;
- unknown markup inserted anywhere in the call never raises, every call that starts ends with JSON arguments,
  streamed equals whole, and a call that does not come out stays in the text;
- a call cut at any point (the model stopped) never raises and streamed equals whole.
"""

from __future__ import annotations

import codecs
import logging

import pytest

from rostra.embedded import embedded_model_path
from rostra.parsing.tools import REGISTRY
from rostra.tokenizer import tokenizer_from_gguf
from test_truncation_matrix import FORMATS, PREFACE
from toolparse import Result, run_parser

EXPECTED = [("get_weather", {"city": "Oslo", "days": 3})]
UNKNOWN = "<bogus>x</bogus>"


def sample(name: str) -> str:
    assert name in FORMATS, f"add a real call output of {name} to test_truncation_matrix.FORMATS"
    return FORMATS[name]


def chunked(text: str, size: int, phase: int = 0) -> list[str]:
    cuts = [0, *range(phase or size, len(text), size), len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def groupings(text: str, variant: int | None = None):
    """Ways to cut `text` into deltas: all of them (each single cut, every size 1 to 16 at every phase), or, for
    one `variant` of many texts checked in a row (a markup inserted at each place, a cut at each place), a few
    sizes at a phase that moves with the variant, so that the row as a whole meets every phase of each size (the
    whole grid per variant made this file minutes of CI's time once forty parsers were registered)."""
    if variant is None:
        yield from ([text[:cut], text[cut:]] for cut in range(1, len(text)))
        for size in range(1, 17):
            for phase in range(size):
                yield chunked(text, size, phase)
        return
    for size in (1, 2, 3, 5, 8, 13):
        yield chunked(text, size, variant % size)


def same_everywhere(name: str, text: str, layered: bool, variant: int | None = None) -> Result:
    whole = run_parser(name, [text], layered=layered)
    for pieces in groupings(text, variant):
        split = run_parser(name, pieces, layered=layered)
        assert (split.content, split.calls) == (whole.content, whole.calls), pieces
    return whole


@pytest.fixture(scope="module")
def tokenizer():
    return tokenizer_from_gguf(embedded_model_path())


@pytest.mark.parametrize("layered", [False, True], ids=["strict", "layered"])
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_grouping_into_deltas_gives_the_same_call(name, layered, tokenizer):
    output = sample(name)
    whole = same_everywhere(name, output, layered)
    assert whole.calls == EXPECTED
    tokens = [tokenizer.token_bytes(token) for token in tokenizer.encode_plain(output)]
    for per_delta in range(1, 9):  # several tokens per delta (speculative decoding, MTP)
        decoder = codecs.getincrementaldecoder("utf-8")()  # as the server's decoder: a character split is held
        pieces = [decoder.decode(b"".join(tokens[at: at + per_delta])) for at in range(0, len(tokens), per_delta)]
        assert "".join(pieces) == output
        grouped = run_parser(name, pieces, layered=layered)
        assert (grouped.content, grouped.calls) == (whole.content, whole.calls), per_delta


@pytest.mark.parametrize("layered", [False, True], ids=["strict", "layered"])
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_unknown_markup_anywhere_in_a_call_never_loses_it(name, layered, caplog):
    caplog.set_level(logging.CRITICAL)
    output = sample(name)
    start = output.index(PREFACE) + len(PREFACE) if PREFACE in output else 0
    for at in range(start, len(output) + 1):
        text = output[:at] + UNKNOWN + output[at:]
        whole = same_everywhere(name, text, layered, variant=at)  # (run_parser: every call ends, JSON arguments)
        # Not a call: it stays in the text (a stray closing tag of the format may be dropped as markup).
        kept = whole.content.replace(UNKNOWN, "")
        assert whole.calls or ("get_weather" in kept and "Oslo" in kept), f"the call vanished: {text!r} -> {kept!r}"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_call_cut_anywhere_ends_the_stream_alike(name, caplog):
    caplog.set_level(logging.CRITICAL)
    output = sample(name)
    for at in range(len(output) + 1):
        same_everywhere(name, output[:at], layered=True, variant=at)


def tagged_formats() -> list[str]:
    """The registered parsers of the tagged family (tagged_calls.py: parameters between tags), whoever added them."""
    from rostra.parsing.tools import tool_parser_class
    from rostra.parsing.tools.tagged_calls import TaggedCallsToolParser

    return [name for name in sorted(REGISTRY) if issubclass(tool_parser_class(name), TaggedCallsToolParser)]


@pytest.mark.parametrize("name", tagged_formats())
def test_unknown_markup_between_parameters_loses_no_argument(name):
    """Markup the format does not have, after the call's head, between parameters or before the call's close, is
    skipped: every parameter is still read (the stream used to close the call at it, with the arguments so far)."""
    from rostra.parsing.tools import tool_parser_class

    tags = tool_parser_class(name).tags
    output = sample(name)
    if tags.parameter_open not in output:
        pytest.skip(f"{name} writes its calls in markup of its own, read into these tags before parsing")
    head = output.index(tags.parameter_open)
    places = [head] + [at for at in range(head + 1, len(output)) if output.startswith(tags.parameter_open, at)]
    if tags.function_close:
        places.append(output.rindex(tags.function_close))
    for at in places:
        text = output[:at] + UNKNOWN + output[at:]
        assert same_everywhere(name, text, layered=True, variant=at).calls == EXPECTED, text
