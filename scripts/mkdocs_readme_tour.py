"""MkDocs hook (mkdocs.yml `hooks:`): pages written once, outside docs/, shown on the site as they are.

- The home page is docs/index.md followed by the README's tour (its sections from "Set up" to the one before
  "Point a client at it"); the README's links into docs/ are made relative to the site.
- benchmarks/README.md becomes the page benchmarks.md, and the docs pages' links to it
  (`../benchmarks/README.md`, right when the pages are read on GitHub) point there; its own links to result
  files outside the site are left as text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

FIRST, END = "## Set up", "## Point a client at it"


def _root(config: Any) -> Path:
    return Path(config.config_file_path).parent


def tour(readme: str) -> str:
    start, end = readme.index(FIRST), readme.index(END)
    return re.sub(r"\]\(docs/([^)]+)\)", r"](\1)", readme[start:end])


def benchmarks_page(text: str) -> str:
    return re.sub(r"\[([^\]]+)\]\((results/[^)]+)\)", r"\1 (`benchmarks/\2`)", text)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    text = (_root(config) / "benchmarks" / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks.md", content=benchmarks_page(text)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = markdown.replace("](../benchmarks/README.md", "](benchmarks.md")
    if page.file.src_uri == "index.md":
        readme = (_root(config) / "README.md").read_text(encoding="utf-8")
        markdown = markdown.rstrip() + "\n\n" + tour(readme)
    return markdown
