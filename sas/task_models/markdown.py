"""Untrusted text (a service's error, a signal's note, a task's input) made safe to put in the
Markdown the Temporal UI renders: task details, current details and summaries.

Text a service answers can carry its own markup: ``[OPEN THE CARD FORM](https://evil.example)``
would become a real link beside sas's "Next:" instructions, and a newline followed by ``**Next:**``
a second, false instruction. So every control and format character (newlines, escapes,
bidirectional overrides) becomes a space, each character Markdown gives a meaning is escaped with
a backslash (CommonMark shows it as itself), and the two forms a renderer turns into a link
without brackets (``scheme://`` and ``www.``) are broken.

A pure function of its argument: workflow code calls it, and replaying gives the same text.
"""

from __future__ import annotations

import re
import unicodedata

# Characters CommonMark and GFM give a meaning inline (emphasis, code, links, images, HTML,
# tables, strike-through) or at the start of a line (headings, quotes, lists).
_MARKUP = re.compile(r"([\\`*_\[\]<>!|~#])")
# What a GFM renderer links without brackets: an escaped ':' or '.' keeps the text and drops the link.
_BARE_LINK = re.compile(r"(?<=[A-Za-z0-9])(:)(?=//)|(?<![A-Za-z0-9.])(www)(\.)", re.IGNORECASE)


def markdown_text(value: object, limit: int | None = None) -> str:
    """``value`` as text that renders as itself in Markdown, on one line.

    Args:
        value: Any text from outside sas (``str()`` of anything else).
        limit: Most characters of the text kept (before escaping, so an escape is never cut).
    """
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in str(value))
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    text = _MARKUP.sub(r"\\\1", text)
    return _BARE_LINK.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", text)
