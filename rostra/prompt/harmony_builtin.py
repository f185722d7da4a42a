"""gpt-oss's built-in tools as its system message declares them: `browser` (web search) and `python` (a
stateful notebook). The text is the declaration the model was trained on (the same that OpenAI's
`openai-harmony` writes for its browser and python tool namespaces), so the model calls them as it learnt to:
`to=browser.search` with JSON arguments, `to=python` with code."""

from __future__ import annotations

from typing import Literal

BuiltinTool = Literal["browser", "python"]

BROWSER = """## browser

// Tool for browsing.
// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.
// Cite information from the tool using the following format:
// `【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.
// Do not quote more than 10 words directly from the tool output.
// sources=web (default: web)
namespace browser {

// Searches for information related to `query` and displays `topn` results.
type search = (_: {
query: string,
topn?: number, // default: 10
source?: string,
}) => any;

// Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.
// Valid link ids are displayed with the formatting: `【{id}†.*】`.
// If `cursor` is not provided, the most recent page is implied.
// If `id` is a string, it is treated as a fully qualified URL associated with `source`.
// If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on \
the most relevant passage, if available.
// Use this function without `id` to scroll to a new location of an opened page.
type open = (_: {
id?: number | string, // default: -1
cursor?: number, // default: -1
loc?: number, // default: -1
num_lines?: number, // default: -1
view_source?: boolean, // default: false
source?: string,
}) => any;

// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.
type find = (_: {
pattern: string,
cursor?: number, // default: -1
}) => any;

} // namespace browser"""

PYTHON = """## python

Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This \
tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. \
when creating plots, tables, or files).

When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook \
environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive \
at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. \
Depends on the cluster."""

DECLARATIONS: dict[str, str] = {"browser": BROWSER, "python": PYTHON}

# The functions the built-in tools stand for in a chat request's `tools` (how the Responses API offers them to
# gpt-oss, each marked `"harmony_builtin": true`, so a client's own function named `python` stays a function):
# declared in the system message rather than among the developer message's functions, called on the analysis
# channel by these names (`to=browser.search`), python with its code as written.
MARKER = "harmony_builtin"
BUILTIN_FUNCTIONS: dict[str, BuiltinTool] = {"browser.search": "browser", "browser.open": "browser",
                                             "browser.find": "browser", "python": "python"}
ORDER: tuple[BuiltinTool, ...] = ("browser", "python")
