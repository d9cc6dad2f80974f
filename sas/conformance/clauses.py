"""The clauses of the HTTP contract (docs/http-contract.md), each driven against a running
service under keys made up for the check, and judged on what the service answered.

A clause that the kit cannot drive the service into says so (``not exercised``) rather than
pass: the kit does not know a service's business rules, so a refusal needs a body the caller
says is refused, and a request in flight needs a way to slow one down (:class:`SlowCall`).

A request is asked again while its answer is transient, as the Agent's quick retries do (the
exchange's rule); one still transient after them ends its clause as not exercised
(:class:`Unanswered`): the service was not there to answer, which breaks no promise, and sas
would ask again later too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from sas.conformance.exchange import SUCCESS, Answer, Exchange, is_refusal, is_voided, model_problem
from sas.conformance.report import Verdict
from sas.conformance.target import CallSpec, CheckTarget, ServiceCheckError, new_task_id
from sas.task_models.results import secret_fields
from sas.task_types.services import HttpRequest, UnsafeValue

Judged = tuple[Verdict, str]
_VOIDED = '409 {"error": "voided"}'


@dataclass(frozen=True)
class SlowCall:
    """What a slowdown hook is asked to slow: the next forward call under ``key``.

    Attributes:
        url: The service's base URL.
        service: The service's name.
        call: The forward call, ``<service>.<action>``.
        path: Its path.
        task_id: The check's made-up task id (the body carries it where the call takes ``TaskId()``).
        key: The forward's Idempotency-Key.
        body: The body that will be sent.
        seconds: How long the service should hold the call before it acts.
    """

    url: str
    service: str
    call: str
    path: str
    task_id: str
    key: str
    body: Mapping[str, Any]
    seconds: float


class Unanswered(Exception):
    """A request whose answers stayed transient through the Agent's quick retries: its clause
    cannot be judged (not exercised), and is not failed."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.shown())
        self.answer = answer

    def detail(self) -> str:
        attempts = len(self.answer.retried) + 1
        times = f"after {attempts} attempts" if attempts > 1 else "(not asked again: the whole timeout ran)"
        return f"not exercised: {self.answer.request} stayed transient {times}: {self.answer.shown()}"


def answered(answer: Answer) -> Answer:
    """``answer``, unless it is still transient after its retries (:class:`Unanswered`)."""
    if answer.transient:
        raise Unanswered(answer)
    return answer


SlowForward = Callable[[SlowCall], Awaitable[None]]
"""A hook that makes the service hold the next forward call under a key for a while (through
the service's fault injection); raises :class:`ServiceCheckError` when it cannot."""


@dataclass
class Session:
    """One target's check: the requests made so far and what came back."""

    exchange: Exchange
    target: CheckTarget
    url: str
    service: str
    slow_forward: SlowForward | None = None
    slow_s: float = 2.0
    seen: list[tuple[Answer, type[BaseModel] | None]] = field(default_factory=list)
    done: tuple[str, Answer] | None = None  # a key whose forward succeeded, and its answer

    def new_key(self) -> tuple[str, str]:
        task_id = new_task_id()
        return task_id, self.target.key(task_id)

    def forward_request(self, task_id: str, key: str, *, refusing: bool = False) -> HttpRequest:
        """The forward's request, built as sas's HTTP Agent builds it for the step."""
        target = self.target
        spec = target.forward
        if refusing and target.refused_body is not None and spec.declared is None:
            spec = replace(spec, body=target.refused_body)
        call = target.step_call(task_id, key, refusing=refusing and target.refused_body is not None)
        try:
            return spec.request(call)
        except UnsafeValue as err:
            raise ServiceCheckError(f"the sample input cannot be sent: {err}") from None

    async def forward(self, task_id: str, key: str, *, refusing: bool = False) -> Answer:
        spec = self.target.forward
        answer = await self._send(spec, self.forward_request(task_id, key, refusing=refusing), key)
        self.seen.append((answer, spec.result))
        return answered(answer)

    async def undo(self, task_id: str, key: str) -> Answer:
        """The undo of ``key``'s forward, sent as sas sends it when the forward's answer is not
        known: under ``<key>:undo``, with null for the effect's id. An undo whose path names the
        effect cannot be sent so: as sas's Agent does, the lookup is asked first, and when it
        says nothing was done (which voids the key) the undo is not sent."""
        spec = self.target.undo
        assert spec is not None
        known: dict[str, Any] | None = None
        if spec.takes_forward_in_path() and self.target.lookup is not None:
            found = await self.look_up(key)
            said = self.says(found)
            if said == "nothing":
                return Answer(
                    f"{spec.method} {spec.path}",
                    None,
                    "",
                    {},
                    SUCCESS,
                    f"not sent, as by sas: the lookup said nothing was done under {key} ({found.shown()})",
                )
            if said != "done":
                return found
            known = dict(found.data)
        return await self.undo_of(task_id, key, known)

    async def undo_of(self, task_id: str, key: str, forward: dict[str, Any] | None) -> Answer:
        """The undo of ``key``'s forward whose result is ``forward`` (None: not known)."""
        spec = self.target.undo
        assert spec is not None
        call = self.target.step_call(task_id, key, undo=True, forward=forward)
        try:
            request = spec.request(call, forward)
        except UnsafeValue as err:
            # sas's Agent fails the undo for good on this: nothing could be sent.
            answer = Answer(f"{spec.method} {spec.path}", None, "", None, "InvalidInput", f"not sendable: {err}")
        else:
            answer = await self._send(spec, request, f"{key}:undo")
        self.seen.append((answer, spec.result))
        return answered(answer)

    async def _send(self, spec: CallSpec, request: HttpRequest, key: str) -> Answer:
        answer = await self.exchange.send(request, key, spec.result)
        # A result picked out of a nested answer is what the step keeps, and what is judged.
        return replace(answer, data=spec.result_of(answer.data)) if answer.ok else answer

    async def look_up(self, key: str) -> Answer:
        assert self.target.lookup is not None
        answer = await self.exchange.look_up(self.target.lookup, key)
        if self.target.forward.result is not None:  # it answers the forward's fields, secrets too
            answer = replace(answer, hidden=secret_fields(self.target.forward.result))
        self.seen.append((answer, None))
        return answered(answer)

    def id_fields(self, answer: Answer) -> list[str]:
        """The fields a lookup's answer is read by: the undo's ``Forward`` fields, else those it
        shares with the forward's result (its model, or the answer seen)."""
        if self.target.id_fields:
            return list(self.target.id_fields)
        keys = answer.data.keys() if isinstance(answer.data, dict) else ()
        model = self.target.forward.result
        known = set(model.model_fields) if model is not None else set()
        if self.done is not None and isinstance(self.done[1].data, dict):
            known |= set(self.done[1].data)
        return sorted(k for k in keys if k in known)

    def says(self, answer: Answer) -> str:
        """A lookup's answer: ``done``, ``nothing``, ``in_flight`` or ``unclear``."""
        if answer.reading == "in_flight":
            return "in_flight"
        if is_refusal(answer) and answer.status == 404:
            return "nothing"
        fields = self.id_fields(answer)
        if not answer.ok or not fields:
            return "unclear"
        return "nothing" if all(answer.data.get(f) is None for f in fields) else "done"

    def ids(self, answer: Answer) -> dict[str, Any]:
        data = answer.data if isinstance(answer.data, dict) else {}
        return {f: data.get(f) for f in self.id_fields(answer)}


# ------------------------------------------------------------------------- the clauses


async def replay(s: Session) -> Judged:
    task_id, key = s.new_key()
    first = await s.forward(task_id, key)
    if not first.ok:
        return Verdict.NOT_EXERCISED, _no_forward(first)
    s.done = (key, first)
    both = await asyncio.gather(s.forward(task_id, key), s.forward(task_id, key), return_exceptions=True)
    failed = next((e for e in both if isinstance(e, BaseException)), None)
    if failed is not None:
        raise failed
    again = [a for a in both if isinstance(a, Answer)]
    other = next((a for a in again if not a.ok or a.data != first.data), None)
    if other is not None:
        return Verdict.FAIL, f"a repeat under one key answered {other.shown()}; the first {first.shown()}"
    if s.target.lookup is not None:
        found = await s.look_up(key)
        if s.says(found) == "done" and s.ids(found) != s.ids(first):
            return Verdict.FAIL, f"repeats answered alike, but the lookup names another effect: {found.shown()}"
    return Verdict.PASS, f"3 requests under {key}, one answer {first.shown()}"


async def lookup_done(s: Session) -> Judged:
    if s.target.lookup is None:
        return Verdict.NOT_EXERCISED, "not exercised: the service declares no lookup"
    if s.done is None:
        return Verdict.NOT_EXERCISED, "not exercised: no forward call succeeded to look up"
    key, first = s.done
    found = await s.look_up(key)
    if s.says(found) == "done" and s.ids(found) == s.ids(first):
        return Verdict.PASS, f"named {s.ids(found)}"
    return Verdict.FAIL, f"the lookup of a done key answered {found.shown()}; the forward {first.shown()}"


async def lookup_nothing(s: Session) -> Judged:
    if s.target.lookup is None:
        return Verdict.NOT_EXERCISED, "not exercised: the service declares no lookup"
    task_id, key = s.new_key()
    found = await s.look_up(key)
    if s.says(found) != "nothing":
        wanted = ", ".join(s.id_fields(found)) or "the forward's id fields"
        return Verdict.FAIL, f"the lookup of an unknown key answered {found.shown()}, not 404 or {wanted} null"
    late = await s.forward(task_id, key)
    if late.ok:
        return Verdict.FAIL, f"the lookup said nothing, then a forward under the key took effect: {late.shown()}"
    if not is_voided(late):
        return Verdict.FAIL, f"after the lookup said nothing, the forward got {late.shown()}, not {_VOIDED}"
    again = await s.look_up(key)
    if s.says(again) != "nothing":
        return Verdict.FAIL, f"after the void, the lookup answered {again.shown()}"
    return Verdict.PASS, f"nothing, then the forward was refused {_VOIDED}"


async def undo_first(s: Session) -> Judged:
    if s.target.undo is None:
        return Verdict.NOT_EXERCISED, f"not exercised: step {s.target.step} has no undo"
    task_id, key = s.new_key()
    undone = await s.undo(task_id, key)
    if not undone.ok:
        return Verdict.FAIL, f"the undo before its forward answered {undone.shown()}, not a success"
    late = await s.forward(task_id, key)
    if late.ok:
        return Verdict.FAIL, f"the forward after its undo took effect: {late.shown()}; the undo must void its key"
    if not is_voided(late):
        return Verdict.FAIL, f"the forward after its undo got {late.shown()}, not {_VOIDED}"
    if s.target.lookup is not None:
        found = await s.look_up(key)
        if s.says(found) == "done":
            return Verdict.FAIL, f"the forward was refused, but the lookup says it was done: {found.shown()}"
    return Verdict.PASS, f"the forward after its undo was refused {_VOIDED}"


async def undo_nothing(s: Session) -> Judged:
    if s.target.undo is None:
        return Verdict.NOT_EXERCISED, f"not exercised: step {s.target.step} has no undo"
    if s.target.undo.takes_forward_in_path() and s.target.lookup is not None:
        return await _undo_done(s)
    task_id, key = s.new_key()
    first = await s.undo(task_id, key)
    if not first.ok:
        return Verdict.FAIL, f"an undo for a key never used answered {first.shown()}, not a success"
    problem = model_problem(first, s.target.undo.result)
    if problem is not None:
        return Verdict.FAIL, problem
    second = await s.undo(task_id, key)
    if not second.ok or second.data != first.data:
        return Verdict.FAIL, f"the undo's repeat answered {second.shown()}; the first {first.shown()}"
    return Verdict.PASS, f"answered {first.shown()}, twice"


async def _undo_done(s: Session) -> Judged:
    """An undo whose path names the effect is never sent for a key never used (sas asks the
    lookup first: undo-first checks that answer voids the key). What sas does send is the undo
    of a done effect, named from the forward's answer: it must succeed, and a repeat under its
    key answer alike."""
    spec = s.target.undo
    assert spec is not None
    if s.done is None:
        return Verdict.NOT_EXERCISED, "not exercised: no forward call succeeded to undo"
    key, done = s.done
    task_id = key.partition(":")[0]
    first = await s.undo_of(task_id, key, done.data)
    if not first.ok:
        return Verdict.FAIL, f"the undo of a done effect {s.ids(done)} answered {first.shown()}, not a success"
    problem = model_problem(first, spec.result)
    if problem is not None:
        return Verdict.FAIL, problem
    second = await s.undo_of(task_id, key, done.data)
    if not second.ok or second.data != first.data:
        return Verdict.FAIL, f"the undo's repeat answered {second.shown()}; the first {first.shown()}"
    return (
        Verdict.PASS,
        f"an unused key is looked up, not undone; the undo of {s.ids(done)} answered {first.shown()}, twice",
    )


async def refusal(s: Session) -> Judged:
    if s.target.refused_body is None:
        return Verdict.NOT_EXERCISED, "not exercised: no refused body given (--refusing JSON)"
    task_id, key = s.new_key()
    refused = await s.forward(task_id, key, refusing=True)
    if refused.ok:
        return Verdict.NOT_EXERCISED, f"not exercised: the forward meant to be refused succeeded: {refused.shown()}"
    if not is_refusal(refused):
        return Verdict.FAIL, f"refused with {refused.shown()}: sas reads that as {refused.reading}, not a refusal"
    data = refused.data
    if not all(isinstance(data.get(f), str) for f in ("error", "message")):
        return Verdict.FAIL, f'the refusal {refused.shown()} is not {{"error": "<code>", "message": "..."}}'
    if s.target.lookup is not None:
        found = await s.look_up(key)
        if s.says(found) != "nothing":
            return Verdict.FAIL, f"after the refusal, the lookup answered {found.shown()}, not nothing done"
    return Verdict.PASS, f"refused {refused.status} {refused.error_code}, nothing done"


async def in_flight(s: Session) -> Judged:
    if s.target.lookup is None:
        return Verdict.NOT_EXERCISED, "not exercised: the service declares no lookup"
    if s.slow_forward is None:
        return Verdict.NOT_EXERCISED, "not exercised: no way to slow a call (--fault-token-file)"
    task_id, key = s.new_key()
    spec = s.target.forward
    request = s.forward_request(task_id, key)
    slow = SlowCall(s.url, s.service, spec.name, request.path, task_id, key, request.body or {}, s.slow_s)
    try:
        await s.slow_forward(slow)
    except ServiceCheckError as err:
        return Verdict.NOT_EXERCISED, f"not exercised: the forward could not be slowed: {err}"
    sending = asyncio.ensure_future(s.forward(task_id, key))
    # The forward is held at the service for slow_s: the lookup is sent well inside that time.
    await asyncio.sleep(s.slow_s / 4)
    if sending.done():
        return Verdict.NOT_EXERCISED, f"not exercised: the slowed forward answered at once: {sending.result().shown()}"
    try:
        found = await s.look_up(key)
    finally:
        # Never left running: the forward ends within its own bound, whatever the lookup did.
        sent_or_not = await asyncio.gather(sending, return_exceptions=True)
    sent = sent_or_not[0]
    if isinstance(sent, BaseException):
        raise sent
    said = s.says(found)
    if said == "in_flight":
        return Verdict.PASS, f"answered {found.shown()} while the forward was served"
    if said == "done" and sent.ok and s.ids(found) == s.ids(sent):
        return Verdict.PASS, f"waited for the forward and named its effect {s.ids(found)}"
    if said == "nothing" and not sent.ok:
        return Verdict.PASS, f"answered nothing and the forward was refused {sent.shown()}: nothing will be done"
    if said == "nothing":
        return Verdict.FAIL, f"answered nothing while the forward was served, and it took effect: {sent.shown()}"
    return Verdict.FAIL, f"the lookup answered {found.shown()} while the forward was served (it got {sent.shown()})"


def answers(s: Session) -> Judged:
    """Judged on every answer of the other clauses: none may be garbage to sas."""
    problems = [a.said for a, _ in s.seen if a.reading == "RemoteGarbage"]
    problems += [p for a, model in s.seen if (p := model_problem(a, model)) is not None]
    if problems:
        return Verdict.FAIL, problems[0]
    successes = sum(1 for a, _ in s.seen if a.ok)
    if not successes:
        return Verdict.NOT_EXERCISED, "not exercised: no call succeeded"
    retried = [a for a, _ in s.seen if a.retried]
    again = ""
    if retried:
        # What a retry met, once: the evidence that the kit asked again, as the Agent would.
        again = f"; {len(retried)} asked again after a transient answer (first: {retried[0].retried[0]})"
    return Verdict.PASS, f"{len(s.seen)} answers, {successes} successes, each valid to sas{again}"


def _no_forward(answer: Answer) -> str:
    if is_refusal(answer):
        return f"not exercised: the service refused the sample forward: {answer.shown()}; give a body it accepts"
    return f"not exercised: the forward under a fresh key answered {answer.shown()}"
