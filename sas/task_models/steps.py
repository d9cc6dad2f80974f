"""What the Scheduler tells its Agents, and what either writes to the state store. A task's
plan and its accept are in ``plans``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from sas.task_models.states import StepState, TaskState
from sas.task_models.text import CleanText, ErrorText


class MirrorStamp(BaseModel):
    """Lets an Agent write its own Processing/Processed rows in order (see task_models.versions)."""

    # Its None fields, and those named below at their default, are left out of its payloads
    # (sas.payload_codec.converter.left_out): it rides in every task's history, and reads back
    # the same without them.
    history_omits_none: ClassVar[bool] = True
    history_omits_at_default: ClassVar[frozenset[str]] = frozenset({"failure_count"})

    seq: int = Field(ge=0, description="The Scheduler's transition stamp (task_models.versions).")
    chain_id: str | None = Field(default=None, description="The task's chain of runs: writes from another are refused.")
    failure_count: int = Field(default=0, ge=0)
    task_state_on_done: TaskState | None = Field(
        default=None, description="Task state to record with the step's success (the last step completes the task)."
    )


class StepCall(BaseModel):
    """The message from the Scheduler to an Agent: what to do, under which key."""

    # Its None fields, and those named below at their default, are left out of its payloads
    # (sas.payload_codec.converter.left_out): it rides in every task's history, and reads back
    # the same without them.
    history_omits_none: ClassVar[bool] = True
    history_omits_at_default: ClassVar[frozenset[str]] = frozenset(
        {"compensation", "results", "task_id", "task_type", "idempotency_key"}
    )

    task_id: str = Field(
        default="",
        description="The task's id; empty in a compact call (``compact_for``): the id of the workflow that scheduled it.",
    )
    task_type: str = Field(default="", description="Empty in a compact call: the type its workflow runs.")
    step: str
    position: int
    idempotency_key: str = Field(
        default="",
        description="Stable across every retry of this step, Temporal's or the Supervisor's;"
        " empty in a compact call: <task>:<step>, and :undo after it for an undo.",
    )
    target_key: str | None = Field(default=None, description="For an undo: the forward step's idempotency key.")
    compensation: bool = False
    payload: dict[str, Any]
    stamp: MirrorStamp
    results: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="The results of the steps done before this one, by step name."
    )
    forward_result: dict[str, Any] | None = Field(
        default=None, description="For an undo: its own forward step's result; None if that never arrived."
    )
    item_key: str | None = Field(
        default=None,
        description="One item of a fan-out step (its payload is the item): the Agent writes no step row,"
        " the Scheduler counts the items.",
    )
    seal: str | None = Field(
        default=None,
        description="The Scheduler's seal on this call (sas.task_models.seals): an Agent runs only a call it verifies.",
    )

    def compact_for(self, workflow_id: str, run_id: str) -> StepCall:
        """This call as a task's own Scheduler sends it once every worker reads compact calls
        (``TaskPlan``'s compact form): without the names its Agent's worker reads from Temporal's
        activity info instead, when they are those of the workflow ``workflow_id``'s run ``run_id``
        that schedules it; whole otherwise (a fan-out's item, a clean-up's undo, a later run of
        the chain, a redrive's key). ``whole_from`` gives it back."""
        if self._names() != self._own(workflow_id, run_id):
            return self
        stamp = self.stamp.model_copy(update={"chain_id": None})
        return self.model_copy(
            update={"task_id": "", "task_type": "", "idempotency_key": "", "target_key": None, "stamp": stamp}
        )

    def whole_from(self, workflow_id: str, run_id: str, task_type: str) -> StepCall:
        """This call with the names a compact one leaves out (its ``task_id`` is empty) filled in
        from the workflow ``workflow_id``'s run ``run_id`` that scheduled it, which runs the task
        type ``task_type``; a whole call as it is."""
        if self.task_id:
            return self
        task_id, key, target, chain_id = self._own(workflow_id, run_id)
        stamp = self.stamp.model_copy(update={"chain_id": chain_id})
        return self.model_copy(
            update={
                "task_id": task_id,
                "task_type": task_type,
                "idempotency_key": key,
                "target_key": target,
                "stamp": stamp,
            }
        )

    def _names(self) -> tuple[str, str, str | None, str | None]:
        return self.task_id, self.idempotency_key, self.target_key, self.stamp.chain_id

    def _own(self, workflow_id: str, run_id: str) -> tuple[str, str, str | None, str]:
        """The task id, key, undo's target and chain of a call its task's first run makes."""
        key = f"{workflow_id}:{self.step}"
        if self.compensation:
            return workflow_id, f"{key}:undo", key, run_id
        return workflow_id, key, None, run_id


class StepResult(BaseModel):
    """What an Agent returns: the remote service's answer, as the step's result model
    (task_models.results) dumped to JSON, secret fields included."""

    # Its None fields, and those named below at their default, are left out of its payloads
    # (sas.payload_codec.converter.left_out): it rides in every task's history, and reads back
    # the same without them.
    history_omits_none: ClassVar[bool] = True
    history_omits_at_default: ClassVar[frozenset[str]] = frozenset({"replayed"})

    data: dict[str, Any] = {}
    replayed: bool = Field(default=False, description="The service answered from its idempotency store.")
    seal: str | None = Field(
        default=None,
        description="The Agent's seal on this result (sas.task_models.seals): the Scheduler takes only a result it verifies.",
    )


class StepTransition(BaseModel):
    """One write to a step row (and its task row), ordered by ``version``."""

    task_id: str
    step: str
    version: int
    state: StepState
    at: datetime
    locked_by: CleanText | None = None
    complete_by: datetime | None = None
    attempt: int | None = None
    failure_count: int | None = None
    last_error: ErrorText | None = Field(default=None, description="Cut to MAX_ERROR_TEXT bytes (task_models.text).")
    error_type: CleanText | None = None
    permanent: bool | None = None
    task_state: TaskState | None = None
    reset_failure_count: bool = Field(
        default=False, description="Set FailureCount to failure_count even if lower (an operator's resubmit)."
    )
    run_id: str | None = Field(default=None, description="The run writing.")
    chain_id: str | None = Field(default=None, description="Its chain: a write from another chain is refused.")
    result: dict[str, Any] | None = Field(
        default=None, description="The step's result without its secret fields (a Processed write); None: unchanged."
    )
    note: CleanText | None = Field(
        default=None,
        max_length=500,
        description="Why a step is Skipped, or what a Waiting step waits for and until when; None: unchanged.",
    )


class TransitionBatch(BaseModel):
    """Transitions the Scheduler records together, in one transaction."""

    transitions: list[StepTransition]
    wake: str | None = Field(
        default=None,
        description="The Supervisor workflow to wake once they are recorded (a failure), signalled from the"
        " activity: the task's own history gains no event and no workflow task from it.",
    )


class AuditRecord(BaseModel):
    """An operator action the Scheduler applied, for the audit log."""

    task_id: str
    run_id: str = ""
    seq: int
    step: str | None = None
    action: str
    actor: CleanText
    reason: CleanText = ""
    changed: CleanText
    at: datetime
    decision_id: str | None = Field(
        default=None,
        description="The Supervisor decision the request names; the state store records the request as the "
        "Supervisor's only if that decision exists for this task (a `by` alone proves nothing).",
    )
