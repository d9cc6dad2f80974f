"""Fake Agents and a fake state store for the Scheduler's fast tests, registered under the
real activity names (as samples-python does). They keep a ledger of effects by idempotency
key, so a test sees exactly what was done and undone, in which order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.agent import sealed_result
from sas.task_models import (
    AuditRecord,
    CallbackEvent,
    StepCall,
    StepPolicyValues,
    StepResult,
    StepTransition,
    TaskAccepted,
    TaskPlan,
    TransitionBatch,
)
from sas.task_models.cleanup import CleanupInput, CleanupRequest

# What a misbehaving service may say: 900 KB of UTF-8, 2.7 MB as Temporal's escaped JSON.
VERBOSE = "é" * 450_000
FAST = StepPolicyValues(complete_by_s=5, max_attempts=2, initial_interval_s=0.1, backoff=1.0, max_interval_s=0.1)


@dataclass
class Services:
    """What the fake Agents do: per activity name, ``ok`` (the default), ``refuse`` (a
    permanent, non-retryable failure), ``down`` (fails retryably, every attempt), ``verbose``
    (refuses with a huge message), ``flaky``
    (fails once per key, then succeeds), ``slow`` (succeeds after a short real pause, so another
    step completes first) or ``held`` (runs until ``released`` is set)."""

    behaviour: dict[str, str] = field(default_factory=dict)
    effects: list[tuple[str, str]] = field(default_factory=list)  # (activity, idempotency key) in order
    attempts: list[tuple[str, str, str]] = field(default_factory=list)  # (activity, key, task queue)
    transitions: list[StepTransition] = field(default_factory=list)
    audits: list[AuditRecord] = field(default_factory=list)
    accepted: list[TaskAccepted] = field(default_factory=list)
    queues: dict[str, str] = field(default_factory=dict)  # step -> task queue of its Agents
    incarnation: int = 1  # what the state store says of the task id (sas resubmit: 2, 3, ...)
    callbacks: list[CallbackEvent] = field(default_factory=list)
    # The clean-ups the Supervisor decided, by task id: what cleanup.plan reads from the state store.
    cleanups: dict[str, CleanupInput] = field(default_factory=dict)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # lets ``held`` Agents finish
    _failed_once: set[str] = field(default_factory=set)

    def agent(self, name: str) -> Callable[..., Any]:
        @activity.defn(name=name)
        async def run(call: StepCall) -> StepResult:
            self.attempts.append((name, call.idempotency_key, activity.info().task_queue))
            how = self.behaviour.get(name, "ok")
            if how == "refuse":
                raise ApplicationError(f"{name} refused", type="Refused", non_retryable=True)
            if how == "verbose":  # refuses with 900 KB of "é", as a misbehaving service may
                raise ApplicationError(f"{name} refused: " + VERBOSE, type="Refused", non_retryable=True)
            if how == "down":  # a service that stays away: each attempt fails, retryably
                raise ApplicationError(f"{name}: 503 service unavailable", type="Unavailable")
            if how == "flaky" and call.idempotency_key not in self._failed_once:
                self._failed_once.add(call.idempotency_key)
                raise ApplicationError(f"{name}: 503 service unavailable", type="Unavailable")
            if how == "slow":
                await asyncio.sleep(0.5)
            while how == "held" and not self.released.is_set():  # runs, heartbeating, until released
                activity.heartbeat()
                await asyncio.sleep(0.1)
            if (name, call.idempotency_key) not in self.effects:  # the service's idempotency store
                self.effects.append((name, call.idempotency_key))
            return sealed_result(call, {"ref": f"{name}:{call.idempotency_key}"})

        return run

    def store(self) -> list[Callable[..., Any]]:
        @activity.defn(name="mirror.accept")
        async def accept(accepted: TaskAccepted) -> TaskPlan:
            self.accepted.append(accepted)
            steps = [
                p.model_copy(update={"policy": FAST, "task_queue": self.queues.get(p.name)}) for p in accepted.steps
            ]
            return TaskPlan(
                steps=steps, compensation_policy=FAST, incarnation=self.incarnation, waits_for_cancelled_attempts=True
            )

        @activity.defn(name="mirror.record")
        async def record(batch: TransitionBatch) -> int:
            self.transitions.extend(batch.transitions)
            return len(batch.transitions)

        @activity.defn(name="mirror.audit")
        async def audit(entry: AuditRecord) -> bool:
            self.audits.append(entry)
            return True

        @activity.defn(name="cleanup.plan")
        async def plan(request: CleanupRequest) -> CleanupInput:
            if request.task_id not in self.cleanups:
                raise ApplicationError(f"no clean-up of {request.task_id} was decided", non_retryable=True)
            return self.cleanups[request.task_id]

        @activity.defn(name="callback.post")
        async def post(event: CallbackEvent) -> None:
            self.callbacks.append(event)

        return [accept, record, audit, plan, post]

    def undone(self) -> list[str]:
        """The activities whose effect was an undo, in order."""
        return [name for name, key in self.effects if key.endswith(":undo")]

    def notes(self, step: str) -> list[str]:
        return [t.note for t in self.transitions if t.step == step and t.note]
