"""What makes two failing steps one incident: the same cause. Pure functions, no I/O.

A cause is (service, step, error class, normalised error text). The text is normalised so that
what differs from task to task (order ids, amounts, timestamps, attempt numbers) does not split
one outage into as many causes as tasks, while what tells outages apart (the endpoint, the HTTP
status, the service's own message) stays:

    /payment/charge answered 503: card network down for order-1868ec4c538e (attempt 3)
    -> /payment/charge answered 503: card network down for order-<id> (attempt <n>)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sas.task_models.queues import service_of

# The text kept of an error, once normalised: enough to tell causes apart, short enough to show.
TEXT_CHARS = 160

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # ISO timestamps and dates first, before their digits are taken one by one.
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    # An id's tail: a run of hex or digits after a dash or underscore (order-1868ec4c538e, ch_81f2...).
    (re.compile(r"(?<=[-_])(?=[0-9a-f]*\d)[0-9a-f]{6,}\b", re.I), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b", re.I), "<id>"),
    # Decimal amounts and long numbers; a three-digit HTTP status stays (503 and 502 are two causes).
    (re.compile(r"\b\d+\.\d+\b"), "<n>"),
    (re.compile(r"\b\d{4,}\b|\b\d{1,2}\b"), "<n>"),
)


def normalise(text: str | None) -> str:
    """The first line of an error, with per-task values replaced by placeholders."""
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    for pattern, placeholder in _RULES:
        line = pattern.sub(placeholder, line)
    return re.sub(r"\s+", " ", line)[:TEXT_CHARS]


@dataclass(frozen=True)
class Cause:
    """One cause of failing steps. ``key`` is stable across Supervisors and runs."""

    service: str | None
    step: str
    error_type: str | None
    text: str

    @property
    def key(self) -> str:
        raw = "\x1f".join((self.service or "", self.step, self.error_type or "", self.text))
        return hashlib.sha256(raw.encode()).hexdigest()[:24]

    def describe(self) -> str:
        where = f"{self.service} at step {self.step}" if self.service else f"step {self.step}"
        return f"{where}: {self.error_type or 'error'}: {self.text or 'no detail'}"


def cause_of(agent: str | None, step: str, error_type: str | None, last_error: str | None) -> Cause:
    """The cause of one failing step; the service is its Agent's name but the last part
    (``payment`` of ``payment.charge``, ``north.flights`` of a team's ``north.flights.book``; ``child``
    of a child step), as ``service_of`` reads it."""
    service = service_of(agent) if agent and "." in agent else None
    return Cause(service=service, step=step, error_type=error_type, text=normalise(last_error))


class Failing(Protocol):
    """A step waiting on a failure, as the incident check reads it (``sas.state_store.alerts.FailingStep``)."""

    @property
    def task_id(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def permanent(self) -> bool: ...
    @property
    def failed_at(self) -> datetime: ...
    @property
    def next_look_at(self) -> datetime | None: ...


@dataclass
class Group:
    """The failing steps of one cause."""

    cause: Cause
    steps: list[Failing] = field(default_factory=list)

    @property
    def task_ids(self) -> set[str]:
        return {s.task_id for s in self.steps}


def group(steps: Iterable[Failing]) -> dict[str, Group]:
    """Failing steps by cause key, each cause's steps oldest failure first."""
    groups: dict[str, Group] = {}
    for s in steps:
        cause = cause_of(s.agent, s.step, s.error_type, s.last_error)
        groups.setdefault(cause.key, Group(cause)).steps.append(s)
    for g in groups.values():
        g.steps.sort(key=lambda s: (s.failed_at, s.task_id))
    return groups
