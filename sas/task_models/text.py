"""Text that is safe to store and print: no NUL or other control characters.

PostgreSQL refuses NUL in text, and control characters garble log lines and
terminals. Text a person supplies (a reason, an address) is *rejected* with a clear
error; text sas merely relays (a remote service's error message) is *cleaned*.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

# C0 controls and DEL, except tab and newline, which reasons and error messages may contain.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_text(value: str) -> str:
    """Replace each control character with U+FFFD, so the text can be stored as it was meant."""
    return _CONTROL.sub("\ufffd", value)


def reject_control(value: str) -> str:
    """Refuse text with a control character, naming where it is."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(f"must not contain control characters (found {found.group()!r} at position {found.start()})")
    return value


CleanText = Annotated[str, AfterValidator(clean_text)]
UserText = Annotated[str, AfterValidator(reject_control)]
"""A ``str`` field that a person fills in (a reason, an address): text with a control character
(NUL, an escape) is refused at the boundary with an error that says where, never stored."""
