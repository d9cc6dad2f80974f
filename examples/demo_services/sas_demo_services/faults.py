"""Fault rules injected at runtime through the admin API, and how a call picks one."""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sas_demo_services.schemas import ENDPOINT_NAMES, SERVICES

FaultKind = Literal["latency", "transient", "hang", "permanent", "down", "lost_response", "garbage"]

# Statuses a client is expected to retry; anything else would not be "transient".
_RETRYABLE_4XX = frozenset({408, 425, 429})


class FaultSpec(BaseModel):
    """A fault rule as posted to ``POST /admin/faults``.

    Attributes:
        endpoint: ``service.action``, ``service.*`` or ``*``.
        kind: What happens to a matching call.
        probability: Chance that a matching call is affected.
        times: How many calls it affects at most; None for no limit.
        latency_ms: Delay before a ``latency`` call proceeds, or before any other kind acts (less
            if the rule is removed first). The request is held under its key meanwhile, as a
            slow service holds it: a lookup of the key waits for it, whatever the fault then does.
        hang_s: How long a ``hang`` call stalls before it gives up (with no effect); removing
            the rule ends the stall at once, as a service that comes back would.
        status: HTTP status of a ``transient`` (default 503) or ``permanent`` (default 422) answer.
        error: Error code of a ``transient`` or ``permanent`` answer.
        message: Error message of the answer.
        message_repeat: The message is said this many times over: a service that answers with a
            huge error (up to about 1 MB), which the Agents must bound before they keep it.
        match_order_id: Only calls whose body ``order_id`` equals this.
        match_order_prefix: Only calls whose body ``order_id`` starts with this: one group of
            orders (a load whose ids share a prefix) failing while the others go through.
        match_parcel: Only calls whose body ``parcel`` equals this (one parcel of a shipment).
    """

    # A misspelt field would silently give a different fault than the one meant.
    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str
    kind: FaultKind
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    times: int | None = Field(default=None, ge=1)
    latency_ms: int | None = Field(default=None, ge=0, le=600_000)
    hang_s: float = Field(default=3600.0, gt=0, le=86_400)
    status: int | None = None
    error: str | None = Field(default=None, min_length=1, max_length=100)
    message: str | None = Field(default=None, max_length=1000)
    message_repeat: int = Field(default=1, ge=1, le=1_000_000)
    match_order_id: str | None = None
    match_order_prefix: str | None = Field(default=None, min_length=1, max_length=200)
    match_parcel: int | None = Field(default=None, ge=1)

    @field_validator("endpoint")
    @classmethod
    def _known_endpoint(cls, value: str) -> str:
        service, _, action = value.partition(".")
        if value == "*" or value in ENDPOINT_NAMES or (action == "*" and service in SERVICES):
            return value
        known = ", ".join(sorted(ENDPOINT_NAMES))
        raise ValueError(f"unknown endpoint {value!r}; expected '*', '<service>.*' or one of {known}")

    @model_validator(mode="after")
    def _fits_kind(self) -> FaultSpec:
        if self.kind == "latency" and self.latency_ms is None:
            raise ValueError("latency_ms is required for kind 'latency'")
        if self.status is not None:
            if self.kind == "transient" and not (500 <= self.status <= 599 or self.status in _RETRYABLE_4XX):
                raise ValueError("a transient status must be 5xx, 408, 425 or 429")
            if self.kind == "permanent" and not (400 <= self.status <= 499 and self.status not in _RETRYABLE_4XX):
                raise ValueError("a permanent status must be 4xx other than 408, 425 and 429")
            if self.kind not in ("transient", "permanent"):
                raise ValueError(f"status does not apply to kind {self.kind!r}")
        return self

    @property
    def said(self) -> str | None:
        """The error message the answer carries (None: the fault's default)."""
        return None if self.message is None else self.message * self.message_repeat

    def matches(self, endpoint: str, order_id: str, parcel: int | None = None) -> bool:
        """Whether a call to ``endpoint`` for ``order_id`` (and ``parcel``, if any) falls under this rule."""
        if self.match_order_id is not None and self.match_order_id != order_id:
            return False
        if self.match_order_prefix is not None and not order_id.startswith(self.match_order_prefix):
            return False
        if self.match_parcel is not None and self.match_parcel != parcel:
            return False
        return self.endpoint in ("*", endpoint, f"{endpoint.partition('.')[0]}.*")


@dataclass
class FaultRule:
    """A stored rule and how much of it is left."""

    spec: FaultSpec
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    remaining: int | None = None
    hits: int = 0
    # Set when the rule is removed: the calls it holds (latency, hang) end then, as when a
    # service comes back, instead of serving out a delay nobody wants any more.
    lifted: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        if self.remaining is None:
            self.remaining = self.spec.times

    @property
    def exhausted(self) -> bool:
        """Whether it has affected as many calls as it may."""
        return self.remaining is not None and self.remaining <= 0

    def to_json(self) -> dict[str, Any]:
        """The rule as ``GET /admin/faults`` lists it."""
        return {"id": self.id, **self.spec.model_dump(), "remaining": self.remaining, "hits": self.hits}


class FaultBook:
    """The rules of one service process: those for one order (``match_order_id``) first, then
    the others, each in insertion order. A rule for one order is what a test or the kit holds
    one call with: it must apply to that call whatever chaos the broader rules are making.

    Args:
        rng: Source of randomness for ``probability`` (seed it for repeatable chaos).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rules: dict[str, FaultRule] = {}
        self._rng = rng or random.Random()

    def add(self, spec: FaultSpec) -> FaultRule:
        """Append a rule."""
        rule = FaultRule(spec)
        self._rules[rule.id] = rule
        return rule

    def rules(self) -> list[FaultRule]:
        """Every rule, exhausted ones included, in insertion order."""
        return list(self._rules.values())

    def remove(self, rule_id: str) -> bool:
        """Delete one rule; False if there is none with that id."""
        rule = self._rules.pop(rule_id, None)
        if rule is not None:
            rule.lifted.set()
        return rule is not None

    def clear(self) -> int:
        """Delete every rule; returns how many there were."""
        count = len(self._rules)
        for rule in self._rules.values():
            rule.lifted.set()
        self._rules.clear()
        return count

    def pick(
        self, endpoint: str, order_id: str, parcel: int | None = None, *, answered: bool = False
    ) -> FaultRule | None:
        """The fault that applies to this call, if any, counting it against its rule.

        Args:
            endpoint: ``service.action`` of the call.
            order_id: The call's ``order_id``.
            parcel: The call's ``parcel``, for one parcel of a shipment.
            answered: The call's key already succeeded. A ``permanent`` rule passes it by: a
                refusal for good of a key whose effect is done would tell the caller nothing
                was done, where the contract has the stored answer replayed. Every other kind
                may hit a repeat, as a network or a proxy would: each is read as transient.

        Returns:
            The first matching, non-exhausted rule whose dice roll fires (one order's rules
            first); None if none does.
            A call it delays ends early when the rule is removed (``FaultRule.lifted``).
        """
        ordered = sorted(self._rules.values(), key=lambda rule: rule.spec.match_order_id is None)
        for rule in ordered:
            if rule.exhausted or not rule.spec.matches(endpoint, order_id, parcel):
                continue
            if answered and rule.spec.kind == "permanent":
                continue
            if self._rng.random() >= rule.spec.probability:
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
            rule.hits += 1
            return rule
        return None
