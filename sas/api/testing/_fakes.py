"""Fake Agents for a team's fast tests (``FakeAgents``): registered under the real activity
names (as samples-python does), answering as the HTTP contract says, each call and effect kept
for the test to read. ``_running.py`` runs a task type with them in Temporal's time-skipping
environment; a wait of days passes in a second, and no service, database or server is needed.

What they cannot show - the HTTP contract, the mirror, the Supervisor, a crash - is for tests
on a real stack (``sas up``, docs/http-contract.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.agent import sealed_result
from sas.api.testing._agent_alone import agents_against
from sas.api.testing._fake_store import FakeStore
from sas.task_models import StepCall, StepResult
from sas.task_models.queues import service_of
from sas.task_types.services import HttpCall
from sas.task_types.steps import AgentCall, StepDefinition
from sas.task_types.task_definition import TaskDefinition

Answer = Mapping[str, Any] | Callable[[StepCall], Mapping[str, Any]]
# Awaited by a fake at a point of its call (FakeAgents.before_call, .at_service).
Gate = Callable[[StepCall], Awaitable[None]]
# Which items of a fan-out a fake picks (FakeAgents.refuse_items, .fail_items, .slow_items): one
# item's key, several keys, or a predicate over the item (the dict its call is given, its input).
ItemChoice = str | Collection[str] | Callable[[Mapping[str, Any]], bool]


def picks(choice: ItemChoice, call: StepCall) -> bool:
    """Whether ``call`` is the call of an item that ``choice`` picks (never a call of no item)."""
    if call.item_key is None:
        return False
    if isinstance(choice, str):
        return call.item_key == choice
    if callable(choice):
        return bool(choice(call.payload))
    return call.item_key in choice


# How often a held fake heartbeats: Temporal hands an activity its cancellation in the answer to
# a heartbeat, so a held call learns of the Scheduler's cancel within this.
BEAT_S = 0.05


@dataclass
class FakeAgents:
    """Stand-ins for a task type's Agents and sas's state store, for fast tests.

    Each fake keeps the effect of a key once, as a service's idempotency store would, so a
    test sees exactly what was done and undone, in which order. They follow the HTTP contract
    as the real run does (docs/http-contract.md): an undo whose forward step had no effect
    under its key is not sent (the real Agent asks the service's lookup, which says nothing
    was done) and leaves the key voided, so a late forward call under it is refused; a
    service declared without a lookup gets the undo regardless, which undoes nothing.

    Attributes:
        answers: Activity name (``flights.book``) -> the result its fake answers: a dict, or a
            function of the ``StepCall``. Default: ``{}``.
        refuse: Activity names whose fake refuses for good (a non-retryable failure, as a 4xx).
        flaky: Activity names whose fake fails once per key (transient), then answers.
        refuse_when, flaky_when: Activity name -> a predicate of the ``StepCall``: only the calls
            it holds for are refused for good, or fail once
            (``{"payroll.pay": lambda call: call.item_key == "r3"}``).
        refuse_items: Activity name -> the fan-out items (an ``ItemChoice``: a key, keys, or a
            predicate over the item) whose calls are refused for good: ``{"payroll.pay": "r3"}``,
            ``{"payroll.pay": lambda item: item["cents"] > 10_000}``.
        fail_items: Alike, for items whose every attempt fails (transient, a 503): each is
            failed once its quick retries are spent, as an item whose service stays down.
        slow_items: Activity name -> (an ``ItemChoice``, a gate): each picked item's call is held
            at its service until the gate returns, as ``at_service`` holds a call; the other
            items go on meanwhile.
        calls: Every attempt, in order: (activity name, the StepCall).
        effects: (activity name, idempotency key) of each effect, once per key, in order.
        bodies: For a step declared as ``HttpCall``: (activity name, the JSON body the call
            would have sent), in order.
        voided: The forward keys an undo reached before any effect under them.
        before_call: Activity name -> a gate awaited as each attempt starts, before its call
            leaves. An attempt cancelled there ends with nothing sent.
        at_service: Activity name -> a gate awaited once a forward call is at its service,
            before its effect. An attempt cancelled there does what the real Agent does: it
            waits for the service's answer (the effect lands, unless an undo voided the key
            first), then ends cancelled. Meanwhile an undo's lookup of that key answers
            ``425 in_flight`` (transient), as the contract's rule says of a request being served.
        serving: The forward keys whose call is at its service, held by ``at_service``.
        cut_off: (activity name, key) of each forward call whose attempt was cancelled while
            it was at its service, in order.
        services: Service name -> the URL of a service of the test's own (a few lines on
            loopback): that service's Agents, hand-written (``Service.action``) or declared as
            data, are not faked but run as on a worker against it. Their effects are that
            service's to show, not in ``effects``.
        store: The state store's stand-in: each task's steps as its rows would show them, from
            which a completed child task is undone when its parent is (``cleanup.plan``).
    """

    answers: dict[str, Answer] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)
    flaky: set[str] = field(default_factory=set)
    refuse_when: dict[str, Callable[[StepCall], bool]] = field(default_factory=dict)
    flaky_when: dict[str, Callable[[StepCall], bool]] = field(default_factory=dict)
    refuse_items: dict[str, ItemChoice] = field(default_factory=dict)
    fail_items: dict[str, ItemChoice] = field(default_factory=dict)
    slow_items: dict[str, tuple[ItemChoice, Gate]] = field(default_factory=dict)
    calls: list[tuple[str, StepCall]] = field(default_factory=list)
    effects: list[tuple[str, str]] = field(default_factory=list)
    bodies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    voided: set[str] = field(default_factory=set)
    before_call: dict[str, Gate] = field(default_factory=dict)
    at_service: dict[str, Gate] = field(default_factory=dict)
    serving: set[str] = field(default_factory=set)
    cut_off: list[tuple[str, str]] = field(default_factory=list)
    services: dict[str, str] = field(default_factory=dict)
    store: FakeStore = field(default_factory=FakeStore)
    _failed_once: set[str] = field(default_factory=set)
    _clients: list[httpx.AsyncClient] = field(default_factory=list)

    def done(self) -> list[str]:
        """The activities whose effect was a forward action, in order."""
        return [name for name, key in self.effects if not key.endswith(":undo")]

    def undone(self) -> list[str]:
        """The activities whose effect was an undo, in order."""
        return [name for name, key in self.effects if key.endswith(":undo")]

    def activities(self, *definitions: TaskDefinition) -> list[Callable[..., Any]]:
        """A fake of every Agent of ``definitions`` and of the state store's activities."""
        agents: dict[str, HttpCall | None] = {}
        real: dict[str, AgentCall] = {}
        for definition in definitions:
            for step in definition.steps:
                if isinstance(step, StepDefinition):
                    pairs = [(step.agent, step.forward), (step.compensation, step.undo)]
                    for name, declared in pairs:
                        if name is None or declared is None:
                            continue
                        if service_of(name) in self.services:
                            real[name] = declared
                        else:
                            agents[name] = declared if isinstance(declared, HttpCall) else None
        found = [*(self._agent(name, call) for name, call in agents.items()), *self.store.activities()]
        for service, url in self.services.items():
            client = httpx.AsyncClient()
            self._clients.append(client)
            found += agents_against(client, url, [a for n, a in real.items() if service_of(n) == service])
        return found

    async def aclose(self) -> None:
        """Close the connections of the Agents run against ``services``."""
        while self._clients:
            await self._clients.pop().aclose()

    def had_effect(self, key: str) -> bool:
        """Whether a forward call had its effect under ``key`` (what a service's lookup answers)."""
        return any(k == key for _, k in self.effects)

    def _agent(self, name: str, declared: HttpCall | None) -> Callable[..., Any]:
        @activity.defn(name=name)
        async def fake(call: StepCall) -> StepResult:
            self.calls.append((name, call))
            self.store.agent_wrote(call, done=False)
            gate = self.before_call.get(name)
            if gate is not None and await _held(gate(call)):
                raise asyncio.CancelledError  # cancelled before its call left: nothing was sent
            if call.compensation and call.target_key in self.serving:
                raise ApplicationError(
                    f"{name}: 425 in_flight (fake): the forward call is still being served",
                    {"status": 425},
                    type="RemoteTransient",
                )
            # An undo of a forward call that did nothing under its key: the lookup says so, and
            # the key is voided, so a forward call still on its way under it does nothing.
            nothing_done = bool(call.compensation and call.target_key and not self.had_effect(call.target_key))
            if nothing_done:
                assert call.target_key is not None
                self.voided.add(call.target_key)
                if declared is None or declared.service.lookup_path is not None:
                    self.store.agent_wrote(call, done=True)
                    return sealed_result(call, {})  # not sent
            if declared is not None:
                self.bodies.append((name, declared.build_body(call)))
            held = None if call.compensation else self._gate_at_service(name, call)
            cut_off = False
            if held is not None:
                self.serving.add(call.idempotency_key)
                try:
                    cut_off = await _held(held(call))
                finally:
                    self.serving.discard(call.idempotency_key)
            if not cut_off:
                return self._served(name, call, nothing_done)
            # Cut off: the service's answer was awaited, as the real Agent does; the attempt ends
            # cancelled all the same, whatever the request met.
            self.cut_off.append((name, call.idempotency_key))
            with contextlib.suppress(ApplicationError):
                self._served(name, call, nothing_done)
            raise asyncio.CancelledError

        return fake

    def _gate_at_service(self, name: str, call: StepCall) -> Gate | None:
        slow = self.slow_items.get(name)
        if slow is not None and picks(slow[0], call):
            return slow[1]
        return self.at_service.get(name)

    def _picked(self, choices: Mapping[str, ItemChoice], name: str, call: StepCall) -> bool:
        choice = choices.get(name)
        return choice is not None and picks(choice, call)

    def _served(self, name: str, call: StepCall, nothing_done: bool) -> StepResult:
        """What the service does with a call that reached it: refuses a voided key, refuses or
        fails as told, else keeps its effect (once per key) and answers."""
        if not call.compensation and call.idempotency_key in self.voided:
            raise ApplicationError(
                f"{name}: 409 voided (fake): an undo reached its key first",
                {"status": 409},
                type="StepVoided",
                non_retryable=True,
            )
        refused = self.refuse_when.get(name)
        if (
            name in self.refuse
            or (refused is not None and refused(call))
            or self._picked(self.refuse_items, name, call)
        ):
            raise ApplicationError(f"{name} refused (fake)", {"status": 422}, type="RemoteRejected", non_retryable=True)
        if self._picked(self.fail_items, name, call):
            raise ApplicationError(f"{name}: 503 (fake): its service stays down for this item", type="RemoteTransient")
        flaky = self.flaky_when.get(name)
        if (
            name in self.flaky or (flaky is not None and flaky(call))
        ) and call.idempotency_key not in self._failed_once:
            self._failed_once.add(call.idempotency_key)
            raise ApplicationError(f"{name}: 503 (fake)", type="RemoteTransient")
        if not nothing_done and (name, call.idempotency_key) not in self.effects:
            self.effects.append((name, call.idempotency_key))
        answer = self.answers.get(name, {})
        data = answer(call) if callable(answer) else answer
        self.store.agent_wrote(call, done=True)
        return sealed_result(call, dict(data))


async def _held(gate: Awaitable[None]) -> bool:
    """Await a gate, heartbeating so that the Scheduler's cancel reaches the attempt; True if
    the attempt was cancelled meanwhile (the gate is then dropped)."""
    waiting = asyncio.ensure_future(gate)
    try:
        while not waiting.done():
            activity.heartbeat()
            await asyncio.wait({waiting}, timeout=BEAT_S)
    except asyncio.CancelledError:
        waiting.cancel()
        return True
    waiting.result()
    return False
