"""gpt-oss harmony parser, data-driven: each case whole, one character at a time and under random
splits (markers split in every position); the streamed result equals the non-streamed one."""

import random

import pytest
from toolparse import fold_tool_calls, run_reasoning_parser, splits

from rostra.parsing.events import (
    Reasoning,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from rostra.parsing.reasoning.gpt_oss import GptOssReasoningParser

A = "<|channel|>analysis<|message|>"
S = "<|start|>assistant"
FINAL = S + "<|channel|>final<|message|>"
WEATHER_CALL = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"

# (id, output, expected reasoning, expected answer, expected calls [(name, arguments)])
CASES = [
    ("analysis+final", A + "User asks 2+2. Easy.<|end|>" + FINAL + "The answer is 4.<|return|>",
     "User asks 2+2. Easy.", "The answer is 4.", []),
    ("final only", "<|channel|>final<|message|>Hello there!<|return|>", "", "Hello there!", []),
    ("analysis then call, recipient after channel",
     A + "Need weather.<|end|>" + S + WEATHER_CALL + '{"city": "Oslo"}<|call|>',
     "Need weather.", "", [("get_weather", {"city": "Oslo"})]),
    ("analysis then call, recipient before channel",
     A + "Need weather.<|end|>" + S + ' to=functions.get_weather<|channel|>commentary json<|message|>'
     '{"city":"Oslo","days":3}<|call|>',
     "Need weather.", "", [("get_weather", {"city": "Oslo", "days": 3})]),
    ("two calls",
     A + "Two things.<|end|>" + S + WEATHER_CALL + '{"city": "Oslo"}<|call|>'
     + S + " to=functions.add<|channel|>commentary <|constrain|>json<|message|>{\"a\": 1, \"b\": 2}<|call|>",
     "Two things.", "", [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2})]),
    ("preamble then call",
     A + "plan<|end|>" + S + "<|channel|>commentary<|message|>Let me check the weather.<|end|>"
     + S + WEATHER_CALL + '{"city": "Paris"}<|call|>',
     "plan", "Let me check the weather.", [("get_weather", {"city": "Paris"})]),
    ("call without <|call|> (engine stopped on it)", WEATHER_CALL + '{"city": "Rome"}',
     "", "", [("get_weather", {"city": "Rome"})]),
    ("missing <|return|>", A + "think<|end|>" + FINAL + "Answer without return", "think", "Answer without return", []),
    ("final ends at <|end|>", FINAL + "Done.<|end|>", "", "Done.", []),
    ("cut off mid-analysis", A + "I am still thinking about < and <| and <|en", "I am still thinking about < and <| and <|en",
     "", []),
    ("cut off mid-header", A + "hm<|end|>" + S + "<|channel|>fin", "hm", "", []),
    # A body that begins with "{" streams as a call at once, so it cannot be taken back: arguments
    # that break are closed where they broke; a body that is no object stays text.
    ("broken JSON closed where it broke", WEATHER_CALL + '{"city": "Oslo"<|call|>', "", "",
     [("get_weather", {"city": "Oslo"})]),
    ("non-object JSON becomes text", WEATHER_CALL + "[1, 2]<|call|>", "", "[1, 2]", []),
    ("NaN is not JSON: it stops the arguments", WEATHER_CALL + '{"a": NaN}<|call|>', "", "", [("get_weather", {})]),
    ("long file write", WEATHER_CALL + '{"city": "' + "line\\n" * 500 + '"}<|call|>', "", "",
     [("get_weather", {"city": "line\n" * 500})]),
    ("empty arguments", WEATHER_CALL.replace("get_weather", "now") + "<|call|>", "", "", [("now", {})]),
    ("plain text", "Just some plain text, x < y and a | b.", "", "Just some plain text, x < y and a | b.", []),
    ("plain text that looks like a marker start", "a <|b|> c <|", "", "a <|b|> c <|", []),
    ("empty", "", "", "", []),
    ("unicode", A + "日本語で考える 🤔<|end|>" + FINAL + "Grüße, 世界 🎉<|return|>", "日本語で考える 🤔", "Grüße, 世界 🎉", []),
    ("unicode arguments", WEATHER_CALL + '{"city": "Zürich 🏔"}<|call|>', "", "", [("get_weather", {"city": "Zürich 🏔"})]),
    ("analysis not closed before final", A + "think" + FINAL + "ans<|return|>", "think", "ans", []),
    ("text after return", FINAL + "ans<|return|> trailing", "", "ans trailing", []),
    # Built-in tools, as gpt-oss writes them (a llama.cpp run of gpt-oss-20b, quoted in avble/av_llm's notes):
    # on the analysis channel, the browser's arguments JSON, python's its code (content type `code` for both).
    ("built-in browser search", A + "We need to browse. Let's search.<|end|>" + S
     + '<|channel|>analysis to=browser.search code<|message|>{"query": "Oslo weather today", "topn": 10, '
       '"source": "news"}<|call|>', "We need to browse. Let's search.", "",
     [("browser.search", {"query": "Oslo weather today", "topn": 10, "source": "news"})]),
    ("built-in python, its code as written", A + "Compute it.<|end|>" + S
     + "<|channel|>analysis to=python code<|message|>import math\nprint({1: math.pi})<|call|>", "Compute it.", "",
     [("python", {"code": "import math\nprint({1: math.pi})"})]),
    ("python code that begins with a brace", S + " to=python<|channel|>analysis code<|message|>{1, 2}<|call|>",
     "", "", [("python", {"code": "{1, 2}"})]),
]


def run(pieces, prompt="", enabled=True):
    reasoning, answer, events = run_reasoning_parser(GptOssReasoningParser(prompt, enabled), pieces)
    calls, ids = fold_tool_calls(events)
    assert all(i.startswith("call_") for i in ids)
    return reasoning, answer, calls


@pytest.mark.parametrize("case_id,output,reasoning,answer,calls", CASES, ids=[c[0] for c in CASES])
def test_gpt_oss_parser(case_id, output, reasoning, answer, calls):
    expected = (reasoning, answer, calls)
    assert run([output]) == expected
    assert run(list(output)) == expected
    assert run([output], enabled=False) == expected  # harmony always has channels
    rng = random.Random(case_id)
    for _ in range(100):
        assert run(splits(output, rng)) == expected


def test_arguments_are_canonical_json():
    parser = GptOssReasoningParser()
    events = parser.feed([Text(WEATHER_CALL + '{ "city" :\n "Oslo" }<|call|>')]) + parser.finish()
    assert [e.text for e in events if isinstance(e, ToolCallArgs)] == ['{"city": "Oslo"}']


def test_streams_incrementally():
    parser = GptOssReasoningParser()
    assert parser.state == "deciding"
    assert parser.feed([Text("<|channel|>analysis")]) == []
    assert parser.state == "deciding"  # the header is not finished: which channel is not known
    assert parser.feed([Text("<|message|>Let me")]) == [Reasoning("Let me")]
    assert parser.in_reasoning
    assert parser.feed([Text(" think<|e")]) == [Reasoning(" think")]  # "<|e" could begin <|end|>
    assert parser.feed([Text("nd|><|start|>assistant<|channel|>final<|message|>Hi")]) == [Text("Hi")]
    assert parser.state == "answering" and not parser.in_reasoning
    assert parser.feed([Text(" there<")]) == [Text(" there")]
    assert parser.feed([Text("|return|>")]) == []
    assert parser.finish() == []


def test_call_state_and_indexes_per_instance():
    parser = GptOssReasoningParser()
    events = parser.feed([Text(WEATHER_CALL + '{"city": "A"}')])
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgs] and parser.state == "answering"
    events += parser.feed([Text("<|call|>" + S + WEATHER_CALL + '{"city": "B"}<|call|>')]) + parser.finish()
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.index for s in starts] == [0, 1] and starts[0].id != starts[1].id


def test_plain_text_stays_deciding():
    parser = GptOssReasoningParser()
    assert parser.feed([Text("hello")]) == [Text("hello")]
    assert parser.state == "deciding" and not parser.in_reasoning


def test_non_text_events_pass_through():
    parser = GptOssReasoningParser()
    end = ToolCallEnd(7)
    assert parser.feed([Text(A + "x"), end]) == [Reasoning("x"), end]


def test_a_long_call_streams_before_its_end():
    # A coding agent writing a file (harmony's commentary channel, as in OpenAI's harmony guide):
    # the arguments must be out before <|call|>, in deltas of several tokens.
    output = WEATHER_CALL + '{"city": "' + "line of code\\n" * 200 + '"}<|call|>'
    parser = GptOssReasoningParser()
    streamed = ""
    for at in range(0, output.index("<|call|>") - 7, 7):
        streamed += "".join(e.text for e in parser.feed([Text(output[at: at + 7])]) if isinstance(e, ToolCallArgs))
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > 2500


# A preamble on the commentary channel, then the final answer (harmony's guide: "preambles" are commentary messages
# without a recipient; the Responses API labels them phase "commentary", the answer "final_answer").
PREAMBLE_THEN_ANSWER = (A + "plan<|end|>" + S + "<|channel|>commentary<|message|>Checking the forecast first.<|end|>"
                        + FINAL + "It is sunny in Oslo.<|return|>")


def phases(events) -> list[tuple[bool, str]]:
    """The text as (commentary?, text) runs, adjacent pieces of one kind joined."""
    runs: list[tuple[bool, str]] = []
    for event in events:
        if isinstance(event, Text) and event.text:
            if runs and runs[-1][0] == event.commentary:
                runs[-1] = (event.commentary, runs[-1][1] + event.text)
            else:
                runs.append((event.commentary, event.text))
    return runs


def test_commentary_text_is_marked_and_the_answer_is_not():
    expected = [(True, "Checking the forecast first."), (False, "It is sunny in Oslo.")]
    rng = random.Random("phases")
    for pieces in [[PREAMBLE_THEN_ANSWER], list(PREAMBLE_THEN_ANSWER)] + [
            splits(PREAMBLE_THEN_ANSWER, rng) for _ in range(50)]:
        assert phases(run_reasoning_parser(GptOssReasoningParser(), pieces)[2]) == expected
    # Plain text outside any message, and a call's body that is no object, are answer text.
    assert phases(run_reasoning_parser(GptOssReasoningParser(), ["plain"])[2]) == [(False, "plain")]
    assert phases(run_reasoning_parser(GptOssReasoningParser(), [WEATHER_CALL + "[1]<|call|>"])[2]) == [(False, "[1]")]


def test_commentary_stays_commentary_through_the_tool_parser_after_it():
    from rostra.parsing.tools.base import ToolSpec
    from rostra.parsing.tools.hermes import HermesToolParser
    from rostra.parsing.tools.layered import layered_tool_parser

    tools = layered_tool_parser(HermesToolParser)([ToolSpec("get_weather", {"type": "object"})])
    events = GptOssReasoningParser().feed([Text(PREAMBLE_THEN_ANSWER)])
    assert phases(tools.feed(events) + tools.finish()) == [(True, "Checking the forecast first."),
                                                           (False, "It is sunny in Oslo.")]
