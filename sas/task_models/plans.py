"""A task's plan, as its accept records it: each step's policy and queue, what a resubmission
or a redrive keeps, and what the state store answered."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from sas.task_models.ids import MAX_STEP_NAME, MAX_TASK_ID
from sas.task_models.states import StepState
from sas.task_models.text import UserText

# Where a step stands to its task type's pivot (its point of no return): the pivot itself, or a
# step after it, which is never undone unless an operator forces it. None: before it, or no pivot.
PivotRole = Literal["pivot", "forward_only"]


class StepPolicyValues(BaseModel):
    """How one step runs: its complete-by and the Agent's quick retries (Temporal's retry policy)."""

    # Its None fields are left out of its payloads (sas.payload_codec.converter.left_out): it
    # rides in every task's history, and reads back the same without them.
    history_omits_none: ClassVar[bool] = True

    # Upper bounds keep a typo from scheduling an attempt for a year or retrying it a million times.
    complete_by_s: float = Field(
        default=10.0, gt=0, le=86_400, description="Start-to-close timeout of one attempt (at most a day)."
    )
    heartbeat_s: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="Heartbeat timeout: a dead Agent is noticed after this. Default: complete_by/3.",
    )
    max_attempts: int = Field(
        default=3, ge=1, le=1_000, description="Quick retries by the Agent before the step is Failed."
    )
    initial_interval_s: float = Field(
        default=0.5, gt=0, le=3_600, description="Wait before the Agent's first quick retry."
    )
    backoff: float = Field(default=2.0, ge=1.0, le=10.0, description="Each quick retry waits this much longer.")
    max_interval_s: float = Field(default=5.0, gt=0, le=86_400, description="Longest wait between quick retries.")

    @property
    def complete_by(self) -> timedelta:
        return timedelta(seconds=self.complete_by_s)

    @property
    def heartbeat(self) -> timedelta:
        return timedelta(seconds=self.heartbeat_s or max(self.complete_by_s / 3, 1.0))


class StepPlan(BaseModel):
    """One declared step, with the policy in force when the task was accepted."""

    # Its None fields are left out of its payloads (sas.payload_codec.converter.left_out): it
    # rides in every task's history, and reads back the same without them.
    history_omits_none: ClassVar[bool] = True

    name: str
    position: int
    agent: str = Field(description="Activity name of the forward action.")
    compensation: str | None = Field(default=None, description="Activity name of the undo, if any.")
    idempotency_key: str
    policy: StepPolicyValues | None = Field(
        default=None, description="Declared policy; None until accepted means: the worker's default step policy."
    )
    task_queue: str | None = Field(
        default=None,
        description="Task queue of the step's Agents (its service's, task_models/queues.py), set at accept;"
        " None: the workflow's own (tasks accepted before service queues).",
    )
    stage: int | None = Field(
        default=None,
        description="Steps of one stage start together (a parallel group); None: a stage of its own, at its position.",
    )
    pivot: PivotRole | None = Field(
        default=None,
        description="The step is its task type's pivot, or comes after it (forward only); None: it may be undone."
        " Plans accepted before pivots existed have none, and replay as they ran.",
    )

    @property
    def resolved_policy(self) -> StepPolicyValues:
        if self.policy is None:
            raise ValueError(f"step {self.name} has no policy yet: plans get one when the task is accepted")
        return self.policy


# The memo key under which `sas resubmit` starts a new run of a finished task (a Resubmission).
RESUBMIT_MEMO = "sas_resubmission"


class Resubmission(BaseModel):
    """An operator's explicit request to run a finished (Compensated or Error) task again."""

    of: str = Field(max_length=64, description="The chain of runs it replaces, as the operator saw it.")
    by: UserText = Field(default="operator", max_length=200)
    reason: UserText = Field(default="", max_length=2000)
    from_step: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_STEP_NAME,
        description="A redrive (`sas redrive`) of a task finished in Error: the step it runs again from. The steps"
        " of the stages before it are kept as they were, with their results and idempotency keys. None: every"
        " step runs again under new keys.",
    )
    force: bool = Field(
        default=False, description="A redrive that runs the pivot again, once it is done (with a reason)."
    )


def incarnation_key(key: str, incarnation: int) -> str:
    """The idempotency key of a step in a later incarnation: ``<task>#<n>:<step>``, never the first one's."""
    if incarnation <= 1:
        return key
    task, _, step = key.rpartition(":")
    return f"{task}#{incarnation}:{step}"


class ParentLink(BaseModel):
    """Which step of which task started a task as its child (``ChildTask``)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(max_length=MAX_TASK_ID)
    step: str = Field(max_length=MAX_STEP_NAME)


class TaskAccepted(BaseModel):
    """Written in one transaction when the Scheduler accepts a task: the task row and its step rows."""

    task_id: str
    task_type: str
    workflow_type: str
    task_queue: str
    payload: dict[str, Any]
    steps: list[StepPlan]
    accepted_at: datetime
    run_id: str | None = Field(default=None, description="The run accepting the task.")
    chain_id: str | None = Field(
        default=None, description="Its first_execution_run_id: the same for every run of one task (resets included)."
    )
    resubmission: Resubmission | None = Field(default=None, description="Set by `sas resubmit`.")
    parent: ParentLink | None = Field(default=None, description="The parent task's step that started it as a child.")


class KeptStep(BaseModel):
    """A step a redrive keeps as the finished incarnation left it: done, with its result (and, in
    the plan's keys, its idempotency key), so the steps after it read it and its undo names it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=MAX_STEP_NAME)
    state: Literal[StepState.PROCESSED, StepState.SKIPPED]
    result: dict[str, Any] | None = None


class AcceptOutcome(BaseModel):
    """What the state store found when a run asked to accept its task."""

    status: Literal["new", "same_task", "other_task", "resubmitted"] = Field(
        description="new: first accept; same_task: a run of the same chain (a reset, a retried accept); "
        "other_task: the id already belongs to another task (a reused id); resubmitted: a new incarnation"
    )
    state: str | None = Field(default=None, description="The existing task's state (other_task).")
    incarnation: int = 1
    why: str | None = Field(default=None, description="Why a redrive was refused (other_task), in the refusal.")
    keys: dict[str, str] | None = Field(
        default=None, description="A redrive's idempotency key of each step; None: the incarnation's new keys."
    )
    kept: list[KeptStep] | None = Field(default=None, description="A redrive's steps kept as they were.")


class PlanChange(BaseModel):
    """What the accept decided for one step beyond what its task type declares, in a compact plan."""

    # Its None fields are left out of its payloads (sas.payload_codec.converter.left_out): it
    # rides in every task's history, and reads back the same without them.
    history_omits_none: ClassVar[bool] = True

    name: str
    idempotency_key: str | None = Field(default=None, description="None: the declared one, <task>:<step>.")
    policy: StepPolicyValues | None = Field(default=None, description="None: the plan's step_policy.")
    task_queue: str | None = Field(default=None, description="None: the workflow's own queue.")


class TaskPlan(BaseModel):
    """The accepted task's steps with the policies of the worker that accepted it (recorded in history).

    Recorded in full (``steps``), or compact (``step_policy`` and ``changes``): only what the
    worker decided, the rest being what the task type declares, which its workflow code holds
    as it holds the commands it replays. A compact plan has no ``steps``, so a worker of the
    code before compact plans, which needs them, fails its workflow task on it (and retries,
    the task untouched) rather than read it as a plan of no steps.
    """

    # Its None fields, and those named below at their default, are left out of its payloads
    # (sas.payload_codec.converter.left_out): it rides in every task's history, and reads back
    # the same without them.
    history_omits_none: ClassVar[bool] = True
    history_omits_at_default: ClassVar[frozenset[str]] = frozenset({"incarnation"})

    steps: list[StepPlan] | None = Field(default=None, description="Each step in full; None in a compact plan.")
    step_policy: StepPolicyValues | None = Field(
        default=None, description="A compact plan's policy of each step it names no other for."
    )
    changes: list[PlanChange] | None = Field(
        default=None,
        description="A compact plan's steps whose key, policy or queue is not step_policy's or declared; None: none.",
    )
    compensation_policy: StepPolicyValues
    supervisor_workflow_id: str | None = Field(default=None, description="Woken when a step fails.")
    search_attributes: bool = Field(
        default=False, description="Whether the namespace has sas's search attributes (sas setup) to upsert."
    )
    publish_progress: bool = Field(
        default=True,
        description="Whether a task that merely moves on (Pending to Processing, the next step) is published"
        " to the search attributes; False: only once it needs a look (a failure, parking, an undo) or ends."
        " Plans accepted before this field existed have none, and keep their upserts when they replay.",
    )
    refused: str | None = Field(
        default=None, description="Why this run may not run the task (its id belongs to another task); None: go."
    )
    incarnation: int = Field(default=1, description="1, then +1 for each `sas resubmit` of the finished task.")
    waits_for_cancelled_attempts: bool = Field(
        default=False,
        description="Whether a forward attempt cancelled because the task is being undone is waited for until it"
        " has ended (its Agent lets a request already sent get its answer), so that its undo is decided on what"
        " the service did. Plans accepted before this field existed have none, and cancel at once when they replay.",
    )
    kept: list[KeptStep] | None = Field(
        default=None, description="A redrive's steps kept done as the finished incarnation left them; None: none."
    )

    def compacted(self, declared: list[StepPlan]) -> TaskPlan:
        """This plan, compact: the policy most of its steps have, and each step's key, policy
        and queue only where they are not that policy's or the ``declared`` step's."""
        steps = self.completed(declared)
        policies = [s.resolved_policy for s in steps]
        common = max(policies, key=policies.count) if policies else None
        given = {s.name: s for s in declared}
        changes = [
            PlanChange(
                name=s.name,
                idempotency_key=None if s.idempotency_key == given[s.name].idempotency_key else s.idempotency_key,
                policy=None if s.policy == common else s.policy,
                task_queue=s.task_queue,
            )
            for s in steps
        ]
        changed = [c for c in changes if c.idempotency_key or c.policy or c.task_queue]
        return self.model_copy(update={"steps": None, "step_policy": common, "changes": changed or None})

    def completed(self, declared: list[StepPlan]) -> list[StepPlan]:
        """Each step in full: as recorded, or, from a compact plan, its ``declared`` plan with
        what the accept decided for it."""
        if self.steps is not None:
            return self.steps
        changed = {c.name: c for c in self.changes or []}
        steps = []
        for step in declared:
            change = changed.get(step.name)
            steps.append(
                step.model_copy(
                    update={
                        "idempotency_key": (change and change.idempotency_key) or step.idempotency_key,
                        "policy": (change and change.policy) or self.step_policy,
                        "task_queue": change.task_queue if change else None,
                    }
                )
            )
        return steps
