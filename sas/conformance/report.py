"""What a conformance check found: one result per clause of the HTTP contract, and the report
of a whole service, as lines of at most 80 columns or as JSON."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class Verdict(StrEnum):
    """How a clause fared. ``not exercised`` is said honestly where the kit could not drive the
    service into the case (no body it refuses, no way to slow a call): it is not a pass."""

    PASS = "pass"
    FAIL = "fail"
    NOT_EXERCISED = "not exercised"


class Clause(StrEnum):
    """The clauses of docs/http-contract.md the kit drives a service through, in the order it
    reports them."""

    REPLAY = "replay"
    ANSWERS = "answers"
    REFUSAL = "refusal"
    LOOKUP_DONE = "lookup-done"
    LOOKUP_NOTHING = "lookup-nothing"
    UNDO_FIRST = "undo-first"
    UNDO_NOTHING = "undo-nothing"
    IN_FLIGHT = "in-flight"


CLAUSE_TITLES: dict[Clause, str] = {
    Clause.REPLAY: "the same key gives the same answer and one effect",
    Clause.ANSWERS: "each answer is one sas reads: JSON its model accepts",
    Clause.REFUSAL: "a refusal is a 4xx {error, message}; nothing is done",
    Clause.LOOKUP_DONE: "the lookup of a done key answers its result",
    Clause.LOOKUP_NOTHING: "an unknown key is looked up as nothing, and voided",
    Clause.UNDO_FIRST: "an undo before its forward voids the key",
    Clause.UNDO_NOTHING: "an undo for a key never used answers success",
    Clause.IN_FLIGHT: "a lookup waits for a forward in flight, or says in_flight",
}

_MARKS = {Verdict.PASS: "ok", Verdict.FAIL: "FAIL", Verdict.NOT_EXERCISED: "--"}


class ClauseResult(BaseModel):
    """One clause, checked on one of the service's calls.

    Attributes:
        clause: The clause's short name (``replay``, ``lookup-nothing``, ...).
        call: The forward call it was checked on, ``<service>.<action>``.
        verdict: ``pass``, ``fail`` or ``not exercised``.
        title: What the clause asks of the service.
        detail: What the kit saw: the evidence of a pass, what broke, or why it was not exercised.
    """

    clause: Clause
    call: str
    verdict: Verdict
    title: str
    detail: str

    def line(self, width: int = 80) -> str:
        """One line, at most ``width`` characters: the mark, the clause, and what was seen."""
        text = self.title if self.verdict is Verdict.PASS else self.detail
        return _fit(f"{_MARKS[self.verdict]:<4} {self.clause.value:<14} {text}", width)


class ServiceReport(BaseModel):
    """Every clause the kit checked on one service.

    Attributes:
        service: The service's name, as declared (``Service("flights")``).
        url: Where it was checked.
        calls: The forward calls checked, ``<service>.<action>`` with their paths.
        results: One result per clause and call, in the order of :class:`Clause`.
    """

    service: str
    url: str
    calls: list[str] = Field(default_factory=list)
    results: list[ClauseResult] = Field(default_factory=list)

    @property
    def failed(self) -> list[ClauseResult]:
        """The clauses the service broke."""
        return [r for r in self.results if r.verdict is Verdict.FAIL]

    @property
    def ok(self) -> bool:
        """True when no clause failed (a clause not exercised is no failure, and is no pass)."""
        return not self.failed

    def lines(self, width: int = 80) -> list[str]:
        """The report for a terminal: for each call, a line naming it, then one line per clause."""
        out = [_fit(f"{self.service} at {self.url}", width)]
        for call in self.calls:
            name = call.partition(":")[0]
            out.append(_fit(call, width))
            out += [r.line(width) for r in self.results if r.call == name]
        return out

    def summary(self) -> str:
        """Counts by verdict, one line."""
        counts = {v: sum(1 for r in self.results if r.verdict is v) for v in Verdict}
        return (
            f"{self.service}: {counts[Verdict.PASS]} clauses pass, {counts[Verdict.FAIL]} fail,"
            f" {counts[Verdict.NOT_EXERCISED]} not exercised"
        )


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"
