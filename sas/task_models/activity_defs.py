"""The activities the workflows call, declared by name and types only: typed references.

A workflow calls ``workflow.execute_local_activity_method(MirrorDefs.accept, accepted, …)``
instead of ``"mirror.accept"``: the name comes from the declaration, the argument and result
types are checked by mypy, and a rename is one edit. The classes in ``activities/`` implement
them (``class MirrorActivities(MirrorDefs)``, each method under ``@implements(...)``) and are
what the worker registers.

The declarations live here, with the models, rather than beside their implementations,
because a workflow module must not load the database or HTTP stack that ``activities/``
imports (the sandbox refuses it: tests/scale/test_sandbox_imports.py); this package is
passed through the sandbox and light.

An Agent's declaration also names the model of its result (``agent_result``): the Agent
validates the service's answer against it and the Scheduler leaves its ``Secret`` fields out
of what it shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import activity

from sas.task_models.cleanup import CleanupInput, CleanupRequest
from sas.task_models.plans import TaskAccepted, TaskPlan
from sas.task_models.sdk_internals import activity_name_of
from sas.task_models.status import CallbackEvent
from sas.task_models.steps import AuditRecord, StepResult, TransitionBatch

F = TypeVar("F", bound=Callable[..., Any])
# A declared Agent, as a step references it: ``charge`` (declared with ``Service.action``), or a
# method of a declarations class, ``PaymentDefs.charge`` (``Service.agent_defn``).
AgentRef = Callable[..., Awaitable[StepResult]]

# Activity name -> the model of its result, for every Agent declared below.
_RESULTS: dict[str, type[BaseModel]] = {}


def activity_name(ref: Callable[..., Any]) -> str:
    """The registered name of a declared activity (``PaymentDefs.charge`` -> ``payment.charge``)."""
    name = activity_name_of(ref)
    if name is None:  # pragma: no cover - every declaration here is named
        raise ValueError(f"{ref!r} is not a named activity")
    return name


def implements(ref: Callable[..., Any]) -> Callable[[F], F]:
    """Register the decorated method under the name of the declaration it implements."""
    return activity.defn(name=activity_name(ref))


def agent_defn(name: str, result: type[BaseModel]) -> Callable[[F], F]:
    """Declare an Agent: its activity name and the model of the result its service answers with."""
    register_result(name, result)
    return activity.defn(name=name)


def register_result(name: str, result: type[BaseModel]) -> None:
    """Record the result model of the Agent ``name`` (an ``agent_defn``, or a step's ``HttpCall``).

    A task type's module is imported again inside the workflow sandbox for each run, declaring
    its models again: the newest declaration is kept (they are the same model)."""
    _RESULTS[name] = result


def agent_result(name: str) -> type[BaseModel] | None:
    """The result model of the Agent registered as ``name``; None for a name not declared here."""
    return _RESULTS.get(name)


class MirrorDefs:
    """The Scheduler's own state-store writes (local activities)."""

    @activity.defn(name="mirror.accept")
    async def accept(self, accepted: TaskAccepted) -> TaskPlan:
        raise NotImplementedError

    @activity.defn(name="mirror.record")
    async def record(self, batch: TransitionBatch) -> int:
        raise NotImplementedError

    @activity.defn(name="mirror.audit")
    async def audit(self, record: AuditRecord) -> bool:
        raise NotImplementedError


class CleanupDefs:
    """What the clean-up workflow asks of the state store and Temporal before it undoes anything."""

    @activity.defn(name="cleanup.plan")
    async def plan(self, request: CleanupRequest) -> CleanupInput:
        raise NotImplementedError


class CallbackDefs:
    @activity.defn(name="callback.post")
    async def post(self, event: CallbackEvent) -> None:
        raise NotImplementedError
