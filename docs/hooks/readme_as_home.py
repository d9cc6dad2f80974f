"""The site's home page is the README, so the front door is written once.

mkdocs runs this module as a hook (``mkdocs.yml``). The README links to the pages as
``docs/<page>.md``, which is right on GitHub; on the site the pages sit beside the home page,
so those links lose their ``docs/`` prefix. A link to anything else in the repository (an
example's README) has no page on the site: its text stays and the link goes. The other way, a
page links to the README as ``../README.md`` (right on GitHub), which on the site is the home
page. ``--strict`` then checks every link that is left, anchors included.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[2] / "README.md"
# [text](target): a markdown link (not an image), its target relative (no scheme, not an anchor).
_RELATIVE_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s]+)\)")


def home_page(readme: str) -> str:
    """The README as the site's ``index.md``."""

    def link(match: re.Match[str]) -> str:
        text, target = match.groups()
        if target.startswith("docs/"):
            return f"[{text}]({target.removeprefix('docs/')})"
        return text

    return _RELATIVE_LINK.sub(link, readme)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: a page's links to the README go to the home page."""
    return markdown.replace("](../README.md", "](index.md")


def on_files(files: Files, config: Any) -> Files:
    """mkdocs hook: add the home page, made from the README."""
    files.append(File.generated(config, "index.md", content=home_page(README.read_text())))
    return files
