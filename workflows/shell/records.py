"""The shell's writes to the state store, as local activities: step transitions (the mirror)
and operator actions (the audit log). Each is numbered by a stamp so that a late, older write
never wins over a newer one (sas/task_models/versions.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import AuditRecord, OperatorRequest, StepStatus, StepTransition, TaskState, TransitionBatch
    from sas.task_models.activity_defs import MirrorDefs, activity_name
    from sas.task_models.errors import MIRROR_WRITE_REFUSED
    from sas.task_models.versions import next_stamp, version_of

# Mirror writes wait out a database outage rather than fail the task.
_MIRROR_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
_MIRROR_TIMEOUT = timedelta(seconds=15)


@dataclass
class Records:
    """Numbers the shell's transitions and writes them. A Scheduler stamps by its clock (stamps
    then grow across resets too); a clean-up counts up from its base, above any clock stamp."""

    task_id: str
    chain_id: str | None
    stamp: int = 0
    seq: int = 0  # this run's transitions, for the audit log
    clocked: bool = True

    def advance(self) -> None:
        """Number the next transition: its audit seq and its mirror stamp."""
        self.seq += 1
        self.stamp = next_stamp(self.stamp, workflow.now()) if self.clocked else self.stamp + 1

    def transition(
        self,
        step: StepStatus,
        *,
        task_state: TaskState | None = None,
        complete_by: datetime | None = None,
        note: str | None = None,
        result: dict[str, object] | None = None,
    ) -> StepTransition:
        return StepTransition(
            task_id=self.task_id,
            step=step.name,
            version=version_of(self.stamp),
            state=step.state,
            at=workflow.now(),
            complete_by=complete_by,
            failure_count=step.failure_count,
            last_error=step.last_error,
            error_type=step.error_type,
            permanent=step.permanent,
            task_state=task_state,
            run_id=workflow.info().run_id,
            chain_id=self.chain_id,
            note=note,
            result=result,
        )

    async def mirror(self, transitions: list[StepTransition], wake: str | None = None) -> None:
        """Record ``transitions``; then, if ``wake`` names the Supervisor, wake it (from the activity)."""
        with unless_refused(activity_name(MirrorDefs.record)):
            await workflow.execute_local_activity_method(
                MirrorDefs.record,
                TransitionBatch(transitions=transitions, wake=wake),
                start_to_close_timeout=_MIRROR_TIMEOUT,
                retry_policy=_MIRROR_RETRY,
                summary="record "
                + ", ".join(
                    f"{t.step} {t.state}" + (f" (task {t.task_state})" if t.task_state else "") for t in transitions
                ),
            )

    async def audit(self, action: str, step: str | None, request: OperatorRequest, changed: str) -> None:
        """Record a request the task applied - who, when, why, what it changed - in the audit log.
        The state store takes it as the Supervisor's only if its decision id exists."""
        self.advance()
        record = AuditRecord(
            task_id=self.task_id,
            run_id=workflow.info().run_id,
            seq=self.seq,
            step=step,
            action=action,
            actor=request.by,
            reason=request.reason,
            changed=changed,
            at=workflow.now(),
            decision_id=request.decision_id,
        )
        with unless_refused(activity_name(MirrorDefs.audit)):
            await workflow.execute_local_activity_method(
                MirrorDefs.audit,
                record,
                start_to_close_timeout=_MIRROR_TIMEOUT,
                retry_policy=_MIRROR_RETRY,
                summary=f"audit: {action} by {request.by}",
            )


@contextmanager
def unless_refused(name: str) -> Iterator[None]:
    """A mirror write the state store refused for good (the activity raised the alert) does not
    stop the task: Temporal holds its state, and the row is repaired from it later."""
    try:
        yield
    except (ActivityError, ApplicationError) as err:
        # A local activity's failure reaches the workflow as the activity's own error, not
        # wrapped in an ActivityError as a regular activity's is; both are handled.
        cause = err.cause if isinstance(err, ActivityError) else err
        if not (isinstance(cause, ApplicationError) and cause.type == MIRROR_WRITE_REFUSED):
            raise
        workflow.logger.error("%s refused for good, the task goes on: %s", name, cause.message)
