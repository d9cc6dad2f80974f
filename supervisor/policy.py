"""Where the Supervisor decides. A pure function of what the scan saw, the thresholds and
the time: no I/O, so it runs inside the deterministic Supervisor workflow and is
recorded in its history.

The ladder (seed 000): each detection raises FailureCount by one and moves CompleteBy
on. Below the threshold the Scheduler is asked to retry the step; at the threshold
it is asked to undo the task, and an operator is alerted. A permanent fault (the
service said no) skips the retries. An undo that keeps failing is parked as Error
for an operator.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from supervisor.models import AlertSpec, Decision, DueStep, SupervisorPolicy

RUNNING = ("Processing", "Compensating")


def decide(step: DueStep, policy: SupervisorPolicy, now: datetime) -> Decision:
    count = step.failure_count + 1
    at_threshold = count >= policy.failure_threshold
    problem = _problem(step)

    def decision(kind: str, reason: str, alert: AlertSpec | None = None) -> Decision:
        return Decision(
            task_id=step.task_id,
            step=step.step,
            kind=kind,
            failure_count=count,
            seen_failure_count=step.failure_count,
            seen_version=step.version,
            observed_state=step.state,
            reason=f"{problem}; {reason}",
            # Give the Scheduler one complete-by to act before this step counts again.
            next_look_at=now + timedelta(seconds=step.complete_by_s) + timedelta(seconds=policy.overdue_grace_s),
            last_error=step.last_error,
            alert=alert,
        )

    if step.state == "CompensationFailed":
        if at_threshold:
            return decision(
                "park",
                f"undo failed {count} times (threshold {policy.failure_threshold}): parked for an operator",
                AlertSpec(
                    severity="critical",
                    kind="compensation_failing",
                    message=f"task {step.task_id}: undoing step {step.step} keeps failing ({count} times)",
                    suggested_action=(
                        f"fix the remote service, then `sas compensate {step.task_id}` to retry the undo; "
                        "or undo by hand and record it"
                    ),
                ),
            )
        return decision("retry", f"retrying the undo (FailureCount {count} < {policy.failure_threshold})")

    if step.state == "Compensating":
        # Temporal is still retrying the undo; count it and say so once it repeats.
        alert = None
        if at_threshold:
            alert = AlertSpec(
                severity="critical",
                kind="compensation_overdue",
                message=f"task {step.task_id}: undo of {step.step} overran its complete-by {count} times",
                suggested_action="check that a worker is running and the remote service answers",
            )
        return decision("retry", "undo still running; CompleteBy extended", alert)

    if step.permanent:
        return decision(
            "compensate",
            "permanent failure: retrying cannot help, undoing the task",
            AlertSpec(
                severity="warning",
                kind="permanent_failure",
                message=f"task {step.task_id}: step {step.step} was rejected: {step.last_error}",
                suggested_action="the task is being compensated; tell the customer or fix the data and resubmit",
            ),
        )

    if at_threshold:
        return decision(
            "compensate",
            f"FailureCount reached the threshold {policy.failure_threshold}: undoing the task",
            AlertSpec(
                severity="critical",
                kind="failure_threshold",
                message=f"task {step.task_id}: step {step.step} failed {count} times; compensating",
                suggested_action="look at the remote service's health; the task is being undone",
            ),
        )
    extended = "CompleteBy extended" if step.state in RUNNING else "asking the Scheduler to retry"
    return decision("retry", f"FailureCount {count} < {policy.failure_threshold}: {extended}")


def _problem(step: DueStep) -> str:
    if step.state in RUNNING:
        when = step.complete_by.isoformat(timespec="seconds") if step.complete_by else "?"
        return f"{step.state} past CompleteBy {when} (LockedBy {step.locked_by or 'nobody'})"
    return f"{step.state}: {step.error_type or 'error'}: {step.last_error or 'no detail'}"
