"""A file's text, by what it is: plain text, Markdown and code as they are (UTF-8, or Latin-1 where it is not);
HTML through the standard library's html.parser (the text of the page, without scripts, styles and markup); PDF
through `pdf_text`, a hook: pypdf where it is installed (the rerank branch's extractor replaces it).

Blocking (a large PDF takes a while): callers run it in a thread.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import PurePath

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


def _pypdf_text(data: bytes) -> str:
    try:
        import pypdf  # optional: installed where PDFs are to be read
    except ImportError:
        raise UnsupportedFile("PDF files need a PDF text extractor: pip install pypdf") from None
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except Exception as exc:  # pypdf's errors are many; the file is what is wrong
        raise UnsupportedFile(f"the PDF could not be read: {exc}") from exc


# The PDF extractor: replaced where a better one is wired (issue 47's rerank branch: files as input).
pdf_text: Callable[[bytes], str] = _pypdf_text


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
