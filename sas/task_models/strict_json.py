"""JSON read at a boundary (a task's input file, a codec server request, a remote service's
answer): standard JSON only.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, and reads ``1e999`` as infinity;
none of them is JSON. A NaN would reach a Temporal payload as the bare literal ``NaN``, which
other SDKs and the UI cannot read, and an infinity inside a model's dict is dumped as ``null``,
silently changing the input. Deep nesting is refused before parsing, so a hostile body meets a
clear error instead of Python's recursion limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: The deepest nesting of objects and arrays accepted; a task input or a payload list needs a few.
MAX_JSON_DEPTH = 64


# A string, or an unterminated one up to the end of the text. Possessive, and matching whatever
# follows a quote, so that no quote is ever a failed start: with a closing quote required, a
# text of many escaped quotes and none closing was scanned to its end once for each of them
# (80 KB took 20 s), and a remote service's answer is read with this too.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class StrictJsonError(ValueError):
    """The text is not standard JSON, or nests deeper than :data:`MAX_JSON_DEPTH`; one line."""


def loads_strict(text: str | bytes | bytearray) -> Any:
    """``text`` parsed as standard JSON.

    Raises:
        StrictJsonError: For invalid JSON (with line and column), a non-finite number, or
            nesting deeper than :data:`MAX_JSON_DEPTH`.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise StrictJsonError(f"not UTF-8 text (byte {err.start})") from None
    _check_depth(text)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        raise StrictJsonError(f"{err.msg} at line {err.lineno} column {err.colno}") from None


def _refuse_constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not a JSON number; give a finite number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise StrictJsonError(f"{literal[:40]} is out of range for a number; give a finite number")
    return value


def _check_depth(text: str) -> None:
    """Count brackets outside strings, with regular expressions rather than a loop over every
    character (a codec server body may be megabytes of base64), and never recursively."""
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise StrictJsonError(f"nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays")
