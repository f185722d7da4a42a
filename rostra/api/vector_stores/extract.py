"""A file's text, by what it is: plain text, Markdown and code as they are (UTF-8, or Latin-1 where it is not);
HTML through the standard library's html.parser (the text of the page, without scripts, styles and markup); PDF
through pypdf, as every API reads a PDF (rostra/file_text.py).

Blocking (a large PDF takes a while): callers run it in a thread.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import PurePath

from rostra.errors import InvalidRequest
from rostra.file_text import pdf_text as read_pdf

# Extensions read as text whatever their contents look like (OpenAI's file_search list, the text ones).
TEXT_SUFFIXES = frozenset({
    ".txt", ".md", ".markdown", ".rst", ".csv", ".json", ".jsonl", ".xml", ".yaml", ".yml", ".toml", ".ini",
    ".log", ".tex", ".py", ".js", ".ts", ".tsx", ".jsx", ".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs",
    ".go", ".rs", ".rb", ".php", ".sh", ".swift", ".kt", ".scala", ".sql", ".r", ".lua", ".pl", ".css",
})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "head"})
_BLOCK_TAGS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                         "pre", "blockquote", "table", "ul", "ol", "hr"})


class UnsupportedFile(ValueError):
    """What the file is and why it cannot be read (a vector store file's `last_error`, `unsupported_file`)."""


def pdf_text(data: bytes) -> str:
    """A PDF's text layer, read as every API reads one (rostra/file_text.py: pypdf, encrypted and scanned ones
    refused with the reason)."""
    try:
        return read_pdf(data, "the PDF", "file")
    except InvalidRequest as exc:
        raise UnsupportedFile(exc.message) from None


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _HtmlText()
    parser.feed(markup)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def file_text(filename: str, data: bytes) -> str:
    """The text of a file named `filename`; UnsupportedFile when it is not a kind this server reads."""
    suffix = PurePath(filename).suffix.lower()
    if suffix == ".pdf" or data.startswith(b"%PDF-"):
        return pdf_text(data)
    if suffix in HTML_SUFFIXES or (suffix not in TEXT_SUFFIXES and data.lstrip()[:15].lower().startswith(
            (b"<!doctype html", b"<html"))):
        return html_text(decoded(data))
    if suffix in TEXT_SUFFIXES or b"\x00" not in data[:8192]:
        return decoded(data)
    raise UnsupportedFile(f"{filename!r} is a binary file of a kind this server does not read (text, Markdown, "
                          "code, HTML and PDF are read)")
