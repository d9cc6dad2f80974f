"""The Agents a task type declares as functions (``Service.action``), run as activities.

Each declared function becomes one activity under its declared name (``<service>.<action>``),
on its service's caller. Each attempt gets its own ``AgentContext``: an ``Agent`` like the
others - the same mirror writes, the same call (Idempotency-Key, complete-by, bulkhead,
breaker, heartbeats, the checked client), the same validation of the answer and the same
lookup of a forward effect - seen through the few methods the declared function needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import activity

from sas.activities.agent import Agent, attempt_deadline, parse_payload
from sas.activities.heartbeats import last_checkpoint, save_checkpoint
from sas.task_models import StepCall, StepResult
from sas.task_models.activity_defs import AgentRef, activity_name
from sas.task_models.queues import service_of
from sas.task_types.agent_declarations import AgentFunction, agent_function
from sas.task_types.services import Service, named_service, service_of_ref

M = TypeVar("M", bound=BaseModel)


class FunctionAgents(Agent):
    """Runs one service's Agents declared as functions, each registered as its own activity."""

    def activities(self, refs: Iterable[AgentRef]) -> list[Callable[..., Any]]:
        """One activity per declared function, under its declared name."""
        return [self._activity(ref) for ref in refs]

    def _activity(self, ref: AgentRef) -> Callable[..., Any]:
        name = activity_name(ref)
        work = agent_function(ref)
        # The service as declared (its lookup path, Service(lookup=)), never rebuilt from its name.
        service = service_of_ref(ref) or named_service(service_of(name))
        if work is None:  # pragma: no cover - only Service.action refs are given here
            raise TypeError(f"{name} is not declared with Service.action")

        async def run(call: StepCall) -> StepResult:
            return await work(call, Attempt(self, call, service))

        run.__name__ = run.__qualname__ = name.replace(".", "_")
        return activity.defn(name=name)(run)


class Attempt:
    """One attempt of a declared function: the ``AgentContext`` it is given."""

    def __init__(self, agent: Agent, call: StepCall, service: Service) -> None:
        self._agent = agent
        self._call = call
        self._service = service

    @property
    def service(self) -> str:
        return self._service.name

    @property
    def deadline(self) -> datetime:
        return attempt_deadline()

    def payload(self, model: type[M], **extra: Any) -> M:
        return parse_payload(model, self._call, **extra)

    async def perform(self, path: str, body: BaseModel | dict[str, Any], *, method: str = "POST") -> StepResult:
        return await self._agent.perform(self._call, path, body, method=method)

    async def send(
        self, path: str, body: BaseModel | dict[str, Any], *, part: str, method: str = "POST"
    ) -> dict[str, Any]:
        if not part or not part.isprintable() or len(part) > 64:
            raise ValueError(f"part {part!r}: 1-64 printable characters (it is part of the call's key)")
        payload = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
        key = f"{self._call.idempotency_key}:{part}"
        return await self._agent.send(path, payload, key, attempt_deadline(), method=method)

    async def forward_id(self, field: str) -> str | None:
        return await self._agent.forward_id(self._call, self._service, field)

    async def nothing_to_undo(self) -> StepResult:
        activity.logger.info(
            "%s: not sent, the service did nothing under %s (its lookup says so)",
            activity.info().activity_type,
            self._call.target_key,
        )
        return await self._agent.nothing_to_undo(self._call)

    def save_checkpoint(self, **progress: int) -> None:
        save_checkpoint(**progress)

    def last_checkpoint(self, field: str) -> int:
        return last_checkpoint(field)


def function_agent_refs(refs: Iterable[AgentRef]) -> list[AgentRef]:
    """Those of ``refs`` declared as functions (``Service.action``)."""
    return [ref for ref in refs if agent_function(ref) is not None]


__all__ = ["AgentFunction", "Attempt", "FunctionAgents", "function_agent_refs"]
