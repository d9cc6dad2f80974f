"""The bounds of a schedule's timing, checked before Temporal sees it: each run is a real task
(a real charge), so a schedule may fire at most once a minute (``SAS_SCHEDULES__MIN_INTERVAL_S``
lowers that for ``--every``) and at least once a year, and a cron expression that can never
fire is refused rather than created to sit silent.

Cron expressions are the standard five fields (minute hour day-of-month month day-of-week) with
``*``, ``?``, numbers, three-letter names, ranges, steps and lists, or one of ``@hourly``,
``@daily``, ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually``. Temporal
accepts more (a seconds or years field, ``CRON_TZ=``, ``@every``); sas takes the part whose
meaning is the same in every cron a reader knows.

A refusal is ``InvalidInput`` naming the value as ``sas schedule create``'s flag does
(``--every '1s': ...``), so the command prints the client's words.
"""

from __future__ import annotations

import re
from datetime import timedelta

from sas.client.errors import InvalidInput

#: The longest --every: a schedule that fires less than once a year is not a schedule.
MAX_INTERVAL = timedelta(days=366)

_INTERVAL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_ALIASES = ("@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# The longest each month can be (February in a leap year): a date past it never comes.
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# Each field's name, lowest and highest value, and the names it takes for its first values.
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_CRON_USE = "five fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * MON-FRI'"


def parse_every(every: str, min_interval_s: int) -> timedelta:
    """``30m``, ``1h``, ``2d``: a whole number and a unit, from ``min_interval_s`` to 366 days."""
    match = re.fullmatch(r"\s*(\d{1,9})\s*([smhd])\s*", every)
    if not match or int(match[1]) == 0:
        raise InvalidInput(f"--every {every!r}: use a whole number and a unit, e.g. 15m, 1h, 1d", field="every")
    interval = timedelta(seconds=int(match[1]) * _INTERVAL_UNITS[match[2]])
    shortest = timedelta(seconds=min_interval_s)
    if interval < shortest:
        raise InvalidInput(
            f"--every {every!r}: at least {_duration(shortest)} between runs (each run is a real task)",
            "SAS_SCHEDULES__MIN_INTERVAL_S lowers the minimum, down to 1 second",
            field="every",
        )
    if interval > MAX_INTERVAL:
        raise InvalidInput(f"--every {every!r}: at most {MAX_INTERVAL.days}d between runs", field="every")
    return interval


def check_cron(cron: str) -> str:
    """The expression, stripped, if it is five valid fields that fire at least once.

    Raises:
        InvalidInput: Naming the field and what it allows, or saying the expression never fires.
    """
    expression = " ".join(cron.split())
    if expression.lower() in _ALIASES:
        return expression.lower()
    if expression.startswith("@"):
        raise InvalidInput(f"--cron {cron!r}: use {_CRON_USE}, or one of {', '.join(_ALIASES)}", field="cron")
    fields = expression.split(" ")
    if len(fields) != len(_FIELDS):
        raise InvalidInput(f"--cron {cron!r}: {len(fields)} field(s); use {_CRON_USE}", field="cron")
    values = [_field(cron, text, *spec) for text, spec in zip(fields, _FIELDS, strict=True)]
    days, months = values[2], values[3]
    if not any(day <= _MONTH_DAYS[month - 1] for day in days for month in months):
        raise InvalidInput(f"--cron {cron!r}: never fires (no month in it has that day)", field="cron")
    return expression


def _field(cron: str, text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    """The values one field selects; ``*`` and ``?`` select them all."""
    selected: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"(\*|\?|[A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?(?:/(\d{1,3}))?", part)
        if not match or (match[1] == "?" and name not in ("day of month", "day of week")):
            raise InvalidInput(
                f"--cron {cron!r}: the {name} field {text!r} is not valid", f"use {_CRON_USE}", field="cron"
            )
        if match[1] in "*?":
            if match[2]:
                raise InvalidInput(
                    f"--cron {cron!r}: the {name} field {text!r} is not valid", f"use {_CRON_USE}", field="cron"
                )
            first, last = low, high
        else:
            first = _value(cron, match[1], name, low, high, names)
            # `5/15` is `5-<highest>/15`; a bare value is itself.
            last = _value(cron, match[2], name, low, high, names) if match[2] else (high if match[3] else first)
            if first > last:
                raise InvalidInput(f"--cron {cron!r}: the {name} range {part!r} runs backwards", field="cron")
        step = int(match[3]) if match[3] else 1
        if step == 0:
            raise InvalidInput(f"--cron {cron!r}: the {name} field {text!r} has a step of 0", field="cron")
        selected.update(range(first, last + 1, step))
    return selected


def _value(cron: str, text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.upper() in names:
        return names.index(text.upper()) + (1 if names is _MONTHS else 0)
    if not text.isdigit() or not low <= int(text) <= high:
        allowed = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
        raise InvalidInput(f"--cron {cron!r}: the {name} {text!r} is not in {allowed}", field="cron")
    return int(text)


def _duration(interval: timedelta) -> str:
    seconds = int(interval.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
