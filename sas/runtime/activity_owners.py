"""Only sas starts sas's work: an activity runs only for the workflow that owns it.

Any client of the namespace can ask Temporal to run a registered activity on its own (a
*standalone* activity: ``temporal activity execute --type payment.refund …``), or start a
workflow of its own on sas's queue that schedules one. Either would reach a service, or the
state store, with none of the checks, ladders and audit that the owning workflow carries. So
every worker of sas runs its activities behind this interceptor, which refuses, non-retryably
and before the activity's code runs:

- an activity started by no workflow;
- an Agent (``<service>.<action>``) scheduled by a workflow whose task type does not declare
  it; the clean-up workflow may run only undo Agents, never a forward call;
- any other sas activity (the mirror's writes, the callbacks) scheduled by a workflow that is
  not one of sas's task types or the clean-up;
- a Supervisor activity scheduled by anything but the Supervisor workflow;
- an Agent scheduled by a fan-out's batch workflow that is not the Agent of a fan-out step;
- an Agent whose call carries no seal of the run that scheduled it (``sas.task_models.seals``):
  ownership by identity, not by name, so a workflow of someone else's that only borrows a sas
  name (``CleanupWorkflow``, on a queue of its own) cannot reach a service.

The owners are the task workflows the worker registers, each with the Agents its task type declares. What a client
with write access to the namespace can still do is in docs/security.md ("The trust boundary").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity, worker
from temporalio.exceptions import ApplicationError

from sas.task_models import StepCall, seals
from sas.task_models.fanout import FAN_OUT_BATCH_WORKFLOW
from sas.task_types.discovery import FoundType
from sas.task_types.fan_out import ForEach
from sas.task_types.task_definition import definition_of

# The type of the failure a refused activity ends with: never retried.
ACTIVITY_REFUSED = "ActivityRefused"
CLEANUP_WORKFLOW = "CleanupWorkflow"
SUPERVISOR_WORKFLOW = "SupervisorWorkflow"
SUPERVISOR_PREFIX = "supervisor."

log = logging.getLogger("sas.worker")


@dataclass(frozen=True)
class Owners:
    """Who may schedule what: each task type's workflow name with the Agents it declares, and
    every undo Agent (the clean-up's)."""

    agents_of: dict[str, frozenset[str]]
    undos: frozenset[str]
    every_agent: frozenset[str] = field(init=False)
    workflows: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        # Computed once: the refusal is asked before every activity a worker runs.
        object.__setattr__(self, "every_agent", frozenset().union(*self.agents_of.values(), self.undos))
        object.__setattr__(self, "workflows", frozenset({*self.agents_of, CLEANUP_WORKFLOW}))

    def refusal(self, activity_type: str, workflow_type: str | None) -> str | None:
        """Why ``activity_type`` must not run for ``workflow_type``, or None if it may."""
        if workflow_type is None:
            return "it was started outside any workflow (a standalone activity)"
        if activity_type.startswith(SUPERVISOR_PREFIX):
            if workflow_type != SUPERVISOR_WORKFLOW:
                return f"only the Supervisor workflow runs it, not a {workflow_type}"
            return None
        if workflow_type not in self.workflows:
            return f"{workflow_type} is not a workflow of sas's (a task type's or the clean-up)"
        if activity_type not in self.every_agent:
            return None  # the mirror's writes and the callbacks serve every sas workflow
        if workflow_type == CLEANUP_WORKFLOW:
            return None if activity_type in self.undos else "a clean-up runs undo Agents only"
        if activity_type not in self.agents_of[workflow_type]:
            return f"task type {workflow_type} declares no such step"
        return None


def owners_of(workflows: Sequence[type]) -> Owners:
    """The owners of the Agents of ``workflows``, the task workflows a worker registers (each
    made by ``task_workflow``, with its ``definition``); other classes own no Agent."""
    agents_of: dict[str, frozenset[str]] = {}
    undos: set[str] = set()
    for cls in workflows:
        definition = definition_of(cls)
        if definition is None:
            continue
        agents_of[FoundType(definition, cls, cls.__module__).workflow_name] = frozenset(definition.agents())
        undos.update(s.compensation for s in definition.steps if s.compensation is not None)
        # A fan-out's batches call its items' Agents, forward and undo, and those only.
        fanned = [s for s in definition.steps if isinstance(s, ForEach)]
        batch_agents = {a for s in fanned for a in (s.agent, s.compensation) if a is not None}
        agents_of[FAN_OUT_BATCH_WORKFLOW] = agents_of.get(FAN_OUT_BATCH_WORKFLOW, frozenset()) | batch_agents
    return Owners(agents_of, frozenset(undos))


class OwnedActivities(worker.Interceptor):
    """Worker interceptor: refuse an activity its workflow does not own (``Owners.refusal``)."""

    def __init__(self, owners: Owners, *, accept_unsealed: bool = False) -> None:
        self._owners = owners
        self._accept_unsealed = accept_unsealed

    def owners(self) -> Owners:
        return self._owners

    def unsealed(self, activity_type: str, args: Sequence[Any]) -> str | None:
        """Why an Agent's call must not run: it carries no seal of the run Temporal says
        scheduled it (a workflow that only borrows a sas name, on a queue of its own, cannot
        seal); None if it does, or if the activity is not an Agent."""
        if activity_type not in self._owners.every_agent or self._accept_unsealed:
            return None
        info = activity.info()
        call = args[0] if args else None
        if isinstance(call, StepCall) and seals.call_sealed(
            info.workflow_id or "", info.workflow_run_id or "", activity_type, call
        ):
            return None
        return (
            f"its call carries no seal of {info.workflow_type} {info.workflow_id}'s Scheduler (a look-alike workflow?)"
        )

    def intercept_activity(self, next: worker.ActivityInboundInterceptor) -> worker.ActivityInboundInterceptor:
        return _Inbound(next, self)


class _Inbound(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, owned: OwnedActivities) -> None:
        super().__init__(next)
        self._owned = owned

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        why = self._owned.owners().refusal(info.activity_type, info.workflow_type)
        if why is None:
            why = self._owned.unsealed(info.activity_type, input.args)
        if why is not None:
            by = f"workflow {info.workflow_id}" if info.workflow_id else "no workflow"
            log.warning(
                "activity %s refused: %s",
                info.activity_type,
                why,
                extra={"fields": {"activity": info.activity_type, "scheduled_by": by, "activity_id": info.activity_id}},
            )
            raise ApplicationError(
                f"{info.activity_type} refused: {why}; sas runs its activities only for the workflow that owns them",
                type=ACTIVITY_REFUSED,
                non_retryable=True,
            )
        return await super().execute_activity(input)
