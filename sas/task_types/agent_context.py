"""What a hand-written Agent is given besides its ``StepCall``: the one way it reaches its service.

A hand-written Agent is one function, declared on its service with ``Service.action``::

    @CARDS.action("charge", Charged)
    async def charge(call: StepCall, agent: AgentContext) -> StepResult:
        return await agent.perform("/cards/charge", {"trip": call.task_id, "card": call.payload["card"]})

This module only describes the context (a Protocol), so that a task type's module, which the
workflow sandbox imports for each run, stays light; the worker gives each attempt its own
implementation (``activities/function_agents.py``), on the service's caller: its URL, the step's
``Idempotency-Key``, the attempt's complete-by, the bulkhead, the circuit breaker and the checked
client, as for a call declared as data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from sas.task_models.steps import StepResult

M = TypeVar("M", bound=BaseModel)


class AgentContext(Protocol):
    """One attempt of a hand-written Agent, on its service."""

    @property
    def service(self) -> str:
        """The name of the Agent's service."""
        ...

    @property
    def deadline(self) -> datetime:
        """This attempt's complete-by: nothing is sent after it."""
        ...

    def payload(self, model: type[M], **extra: Any) -> M:
        """The task's input as ``model`` (with ``extra`` fields over it), to send as a body. Input
        that cannot be one is the task's fault: the step fails for good, naming the fields."""
        ...

    async def perform(self, path: str, body: BaseModel | dict[str, Any], *, method: str = "POST") -> StepResult:
        """The step's call: record the attempt (Processing, or Compensating for an undo), send
        ``body`` under the step's Idempotency-Key, validate the answer against the declared result
        model and record it (Processed or Compensated). Its return is the Agent's."""
        ...

    async def send(
        self, path: str, body: BaseModel | dict[str, Any], *, part: str, method: str = "POST"
    ) -> dict[str, Any]:
        """One more call before ``perform`` (a part of the step: one parcel of a shipment), under its
        own key, the step's key and ``:<part>``, so a retried attempt that sends it again is
        answered from the service's record. Its answer is returned as it came, unchecked."""
        ...

    async def forward_id(self, field: str) -> str | None:
        """For an undo: the service's id of the forward effect (``field`` of the forward step's
        result), from that result when the Scheduler has it, else from the service's lookup by
        the forward key. None: the service did nothing under that key (call ``nothing_to_undo``)."""
        ...

    async def nothing_to_undo(self) -> StepResult:
        """An undo with nothing to send (``forward_id`` said so): recorded as Compensated."""
        ...

    def save_checkpoint(self, **progress: int) -> None:
        """Record how far this attempt got; a retried attempt reads it with ``last_checkpoint``."""
        ...

    def last_checkpoint(self, field: str) -> int:
        """How far an earlier attempt of this step got (``save_checkpoint``); 0 if none did."""
        ...
