"""Text that is safe to store and print: no NUL or other control characters, and no more
bytes than where it goes can take.

PostgreSQL refuses NUL in text, and control characters garble log lines and
terminals. Text a person supplies (a reason, an address) is *rejected* with a clear
error; text sas merely relays (a remote service's error message) is *cleaned*.

Text that grows with what a service answers or a signal carries is *bounded* before it is
kept (:func:`bounded`): a task's status travels as Temporal's JSON, in which every non-ASCII
character becomes a 6-byte ``\\uXXXX`` escape (12 for one beyond the BMP), so a message of
900 KB of "é" would weigh 5.4 MB there - over gRPC's limit, and the status query of that task
would fail for everyone who asks. The size counted is that escaped JSON, which is never less
than the text's UTF-8 bytes, so one bound holds for both.
"""

from __future__ import annotations

import json
import re
from typing import Annotated

from pydantic import AfterValidator

# C0 controls and DEL, except tab and newline, which reasons and error messages may contain.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# Bounds in bytes of Temporal's JSON (docs/operator.md, "What sas keeps of what it is told").
MAX_ERROR_TEXT = 1024
"""An error message as a step's ``last_error`` (status, state store, alerts) and in an event."""
MAX_FULL_ERROR_TEXT = 64 * 1024
"""The full text of a service's error, kept in the failure's details in Temporal's history."""
MAX_EVENT_TEXT = 1024
"""One line of a task's ``events``."""

# Any character weighs at most this much in escaped JSON: a surrogate pair, \ud83d\ude00.
_MOST_PER_CHARACTER = 12


def clean_text(value: str) -> str:
    """Replace each control character with U+FFFD, so the text can be stored as it was meant."""
    return _CONTROL.sub("\ufffd", value)


def reject_control(value: str) -> str:
    """Refuse text with a control character, naming where it is."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(f"must not contain control characters (found {found.group()!r} at position {found.start()})")
    return value


def json_size(text: str) -> int:
    """Bytes of ``text`` as a JSON string with every non-ASCII character escaped, quotes not counted."""
    return len(json.dumps(text)) - 2


def bounded(text: str, max_bytes: int, *, cut_note: str = "") -> str:
    """``text`` whole if it fits in ``max_bytes`` bytes of escaped JSON (``json_size``), else its
    start followed by ``... [N more characters cut<cut_note>]``, the whole within ``max_bytes``.

    Args:
        text: What a service or a signal said.
        max_bytes: The bound; at least room for the marker (about 80 bytes plus ``cut_note``).
        cut_note: Said after the count when text is cut, e.g. where the full text is kept.
    """
    if len(text) * _MOST_PER_CHARACTER <= max_bytes:
        return text
    if len(text) <= max_bytes and json_size(text) <= max_bytes:
        return text
    # The marker with the largest count it can carry: the real one is never longer.
    budget = max_bytes - json_size(_marker(len(text), cut_note))
    if budget < 0:
        raise ValueError(f"a bound of {max_bytes} bytes leaves no room for the marker of a cut text")
    # The longest start that fits: its size grows with its length, so a binary search finds it.
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if json_size(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _marker(len(text) - low, cut_note)


def _marker(cut: int, cut_note: str) -> str:
    return f"... [{cut} more characters cut{cut_note}]"


def _error_text(value: str) -> str:
    return bounded(clean_text(value), MAX_ERROR_TEXT)


CleanText = Annotated[str, AfterValidator(clean_text)]
ErrorText = Annotated[str, AfterValidator(_error_text)]
"""An error message sas relays: cleaned, and cut to ``MAX_ERROR_TEXT`` bytes of escaped JSON."""
UserText = Annotated[str, AfterValidator(reject_control)]
"""A ``str`` field that a person fills in (a reason, an address): text with a control character
(NUL, an escape) is refused at the boundary with an error that says where, never stored."""
