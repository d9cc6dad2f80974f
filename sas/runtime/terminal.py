"""Text from outside made safe for a terminal: the one sanitiser every printing path uses.

A remote service's result, an operator's ``--reason``, an alert or a last error may hold
escape sequences (ESC ``[2J`` clears the screen, OSC 8 makes a link, OSC 52 writes the
clipboard), other control characters (a carriage return rewrites the line), or Unicode
direction overrides that show text in another order than it is stored. None of them may
reach a terminal as they are: ``for_terminal`` shows each as a visible escape (``\\x1b``),
so an operator sees that something odd was sent, and nothing acts on it.

Standard library only: the CLI's output, the entry points' error lines and their tests use it.
"""

from __future__ import annotations

import re

# C0 controls (but newline), DEL, the C1 controls (0x9b is a one-byte CSI on some
# terminals), and the Unicode bidi controls and invisible format marks of the Trojan Source
# class. Tab is listed too: it is turned into a space, as a table cell cannot hold it.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\t":
        return " "
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(value: object) -> str:
    """``str(value)`` with every control or direction character shown as a visible escape
    (``\\x1b``, ``\\u202e``) and tabs as spaces. Newlines stay: they break lines, nothing more."""
    return UNSAFE.sub(_visible, "" if value is None else str(value))


def strip_unsafe(text: str) -> str:
    """Drop every control or direction character but newline: the last guard on what a console
    writes, after its layout (dropped rather than shown, so no line grows past its width)."""
    return UNSAFE.sub("", text)
