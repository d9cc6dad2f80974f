"""Where the Supervisor decides. A pure function of what the scan saw, the step's
escalation ladder and the time: no I/O, so it runs inside the deterministic
Supervisor workflow and is recorded in its history.

The ladder (the pattern's "waiting for an extended period" and "undo the task"), after
the Agent's own quick retries have given up and the step is Failed:

1. up to R Supervisor retries, each after a growing delay (``retry_delay_s`` x ``retry_backoff``);
2. then up to K more tries, each after a cool-down C, hoping a long outage ends;
3. then the ladder's outcome: ``compensate`` the task, or ``park`` it as Error for an operator.

FailureCount numbers the rungs: the decision taken at FailureCount n is rung n.
While a rung's delay has not passed since the step Failed, the decision is ``wait``:
CompleteBy moves to when the delay ends, so the scan does not see the step before.
A Processing step past CompleteBy counts too (the Agent hangs or died): CompleteBy is
extended and the Scheduler nudged; when it repeats, an operator is told.
A permanent fault (the service said no) skips straight to the outcome.
An undo that keeps failing is retried R times, then parked for an operator.

Past the task type's pivot (its point of no return) the outcome is always ``park``, never
``compensate``: a step after the pivot, and the pivot itself unless the service refused it for
good (proof it did nothing, so the steps before it may still be undone).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sas.breaker.model import BreakerView
from sas.supervisor.models import AlertSpec, Decision, DecisionKind, DueStep, SupervisorPolicy
from sas.task_models import StepState
from sas.task_models.ladder import Ladder
from sas.task_models.seals import FOREIGN_RESULT

RUNNING = (StepState.PROCESSING, StepState.COMPENSATING)


def rung(n: int, ladder: Ladder) -> tuple[DecisionKind, float, str]:
    """What rung ``n`` (the FailureCount after the decision) of ``ladder`` does, how long
    after the failure it may happen, and how to say so."""
    if n <= ladder.retries:
        return "retry", retry_delay(n, ladder), f"retry {n} of {ladder.retries}"
    if n <= ladder.retries + ladder.cooldown_tries:
        k = n - ladder.retries
        return "retry", ladder.cooldown_s, f"cool-down try {k} of {ladder.cooldown_tries}"
    return ladder.outcome, 0.0, f"ladder spent ({ladder.retries} retries, {ladder.cooldown_tries} cool-down tries)"


def retry_delay(n: int, ladder: Ladder) -> float:
    return min(ladder.retry_delay_s * ladder.retry_backoff ** max(n - 1, 0), ladder.retry_max_delay_s)


def forward_only(step: DueStep) -> bool:
    """Whether the step is past the point of no return: its task may only go forward."""
    return step.pivot == "forward_only" or (step.pivot == "pivot" and not step.permanent)


def decide(step: DueStep, policy: SupervisorPolicy, now: datetime) -> Decision:
    if forward_only(step) and step.ladder.outcome == "compensate":
        # The veto is part of the decision: the ladder ends in parking, and the alerts say so.
        step = step.model_copy(update={"ladder": step.ladder.model_copy(update={"outcome": "park"})})
    count = step.failure_count + 1
    problem = _problem(step)
    look_again = now + timedelta(seconds=step.complete_by_s + policy.overdue_grace_s)

    def decision(
        kind: DecisionKind,
        reason: str,
        alert: AlertSpec | None = None,
        *,
        at: datetime = look_again,
        n: int = count,
        cooled_down: bool = False,
    ) -> Decision:
        return Decision(
            task_id=step.task_id,
            step=step.step,
            kind=kind,
            failure_count=n,
            seen_failure_count=step.failure_count,
            seen_version=step.version,
            epoch=step.resets,
            observed_state=step.state,
            reason=f"{problem}; {reason}",
            # Give the Scheduler one complete-by to act before this step counts again.
            next_look_at=at,
            last_error=step.last_error,
            alert=alert,
            cooled_down=cooled_down,
        )

    if step.state == StepState.COMPENSATION_FAILED:
        return _undo_failed(step, now, decision)

    if step.state == StepState.COMPENSATING:
        # Temporal is still retrying the undo; count it and say so once it repeats.
        alert = None
        if count >= 2:
            alert = AlertSpec(
                severity="critical" if count >= policy.failure_threshold else "warning",
                kind="compensation_overdue",
                message=f"task {step.task_id}: undo of {step.step} overran its complete-by {count} times",
                suggested_action="check that a task worker is running and the remote service answers",
            )
        return decision("retry", "undo still running; CompleteBy extended", alert)

    kind, delay, label = rung(count, step.ladder)

    if step.state == StepState.PROCESSING:
        alert = None
        if count >= 2:
            alert = AlertSpec(
                severity="critical" if kind != "retry" else "warning",
                kind="step_overdue",
                message=(
                    f"task {step.task_id}: step {step.step} overran its complete-by {count} times "
                    f"(LockedBy {step.locked_by or 'nobody'})"
                ),
                suggested_action="check the task workers and the remote service; Temporal is still retrying",
            )
        if kind == "compensate":
            return decision(
                "compensate", f"overran {count} times, {label}: undoing the task", _spent(step, count, kind)
            )
        # Parking needs the Scheduler to wait for a decision; a running step cannot be parked.
        return decision("retry", f"{label}; CompleteBy extended", alert)

    if step.permanent and step.error_type == FOREIGN_RESULT:
        # Nobody knows what the service did: the undo's lookup decides, and someone with write
        # access to the namespace completed sas's work from outside. An undo so completed is sent
        # again under its own key: the service answers it from its record, or does it now.
        # Its critical alert was raised with the refusal's audit entry (sas.state_store.mirror).
        if step.state == StepState.COMPENSATION_FAILED:
            return decision("retry", "an undo's result no Agent of sas sealed: not taken; undoing it again")
        outcome: DecisionKind = "park" if forward_only(step) else "compensate"
        return decision(
            outcome,
            "a result no Agent of sas sealed: not taken; "
            + ("undoing the task, its lookup deciding what was done" if outcome == "compensate" else "parked"),
        )

    if step.permanent:
        outcome = step.ladder.outcome
        return decision(
            outcome,
            f"permanent failure: retrying cannot help, {'undoing the task' if outcome == 'compensate' else 'parked for an operator'}"
            + ("; past the point of no return, never undone" if forward_only(step) else ""),
            AlertSpec(
                severity="warning" if outcome == "compensate" else "critical",
                kind="permanent_failure",
                message=f"task {step.task_id}: step {step.step} was rejected: {step.last_error}",
                suggested_action=(
                    "the task is being compensated; tell the customer or fix the data and resubmit"
                    if outcome == "compensate"
                    else _operator_hint(step)
                ),
            ),
        )

    if kind != "retry":
        return decision(
            kind,
            f"{label}: {'undoing the task' if kind == 'compensate' else 'parked for an operator'}"
            + ("; past the point of no return, never undone" if forward_only(step) else ""),
            _spent(step, count, kind),
        )

    due = (step.updated_at or now) + timedelta(seconds=delay)
    cooling = count > step.ladder.retries
    if now < due:
        alert = None
        if cooling:
            alert = AlertSpec(
                severity="warning",
                kind="cooldown",
                message=(
                    f"task {step.task_id}: step {step.step} failed {step.failure_count + 1} times; "
                    f"cooling down {delay:g}s before {label}"
                ),
                suggested_action=f"fix the remote service; or `sas retry {step.task_id}` to try now",
            )
        return decision("wait", f"{label} at {due.isoformat(timespec='seconds')}", alert, at=due, n=step.failure_count)
    # A cool-down's retry is marked: those of one service that end together are its backlog let go
    # at once, which the apply begins a staged release for (supervisor/act/cooled_down.py).
    return decision("retry", f"{label}: asking the Scheduler to retry", cooled_down=cooling)


def _spent(step: DueStep, count: int, kind: str) -> AlertSpec:
    return AlertSpec(
        severity="critical",
        kind="failure_threshold",
        message=(
            f"task {step.task_id}: step {step.step} failed {count} times; "
            + ("compensating" if kind == "compensate" else "parked as Error")
        ),
        suggested_action=(
            "look at the remote service's health; the task is being undone"
            if kind == "compensate"
            else _operator_hint(step)
        ),
    )


def _operator_hint(step: DueStep) -> str:
    if forward_only(step):
        return (
            f"past the point of no return: fix the cause, then `sas retry {step.task_id}`; undoing it needs"
            f" `sas compensate {step.task_id} --force --reason WHY`"
        )
    return f"fix the cause, then `sas retry {step.task_id}` or `sas compensate {step.task_id}`"


def _undo_failed(step: DueStep, now: datetime, decision) -> Decision:  # type: ignore[no-untyped-def]
    tries = step.undo_retries + 1
    ladder = step.ladder
    if tries > ladder.retries:
        return decision(
            "park",
            f"undo failed after {step.undo_retries} Supervisor retries: parked for an operator",
            AlertSpec(
                severity="critical",
                kind="compensation_failing",
                message=f"task {step.task_id}: undoing step {step.step} keeps failing; parked",
                suggested_action=(
                    f"fix the remote service, then `sas compensate {step.task_id}` to retry the undo; "
                    "or undo by hand and record it"
                ),
            ),
        )
    alert = AlertSpec(
        severity="warning",
        kind="compensation_failing",
        message=f"task {step.task_id}: undoing step {step.step} failed; Supervisor retry {tries} of {ladder.retries}",
        suggested_action="check the remote service; the undo is being retried",
    )
    delay = retry_delay(tries, ladder)
    due = (step.updated_at or now) + timedelta(seconds=delay)
    if now < due:
        return decision(
            "wait",
            f"undo retry {tries} of {ladder.retries} at {due.isoformat(timespec='seconds')}",
            alert,
            at=due,
            n=step.failure_count,
        )
    return decision("retry", f"retrying the undo ({tries} of {ladder.retries})", alert)


def _problem(step: DueStep) -> str:
    if step.state in RUNNING:
        when = step.complete_by.isoformat(timespec="seconds") if step.complete_by else "?"
        return f"{step.state} past CompleteBy {when} (LockedBy {step.locked_by or 'nobody'})"
    return f"{step.state}: {step.error_type or 'error'}: {step.last_error or 'no detail'}"


# ---------------------------------------------------------------- vetoes: a decision not taken now
#
# A decision is made from the state store's rows; before it is carried out, what holds it back is
# read from where it lives (the service's breaker row, Temporal's view of the workflow) and judged
# here, as pure functions. ``supervisor/act/vetoes.py`` only fetches those facts and does what these say.


@dataclass(frozen=True)
class PutOff:
    """A decision not taken now, and why.

    Attributes:
        why: What holds it back, in words (logged).
        look_again_at: When the step is looked at again (its CompleteBy moves there); None: the
            decision is dropped and nothing is put off (the workflow has completed: its rows are
            reconciled, which moves the step on).
        held: Held by its service's breaker (counted apart from the other put-offs).
        reconcile: The workflow has completed: its rows are brought in line with Temporal.
    """

    why: str
    look_again_at: datetime | None
    held: bool = False
    reconcile: bool = False


def breaker_holds(view: BreakerView | None, now: datetime, policy: SupervisorPolicy) -> PutOff | None:
    """A step of a service whose breaker holds its work is not failing but waiting: no decision
    and nothing counted; it is looked at again when the breaker may probe (or after an interval)."""
    if view is None:
        return None
    until = max(view.retry_at or now, now + timedelta(seconds=max(policy.interval_s, 1.0)))
    since = (view.outage_since or view.since or now).isoformat(timespec="seconds")
    return PutOff(f"the {view.service} breaker holds its steps (open since {since})", until, held=True)


def temporal_says_wait(
    status: str,
    waiting: str | None,
    workflow_task_waited_s: float | None,
    step_complete_by_s: float,
    now: datetime,
    policy: SupervisorPolicy,
) -> PutOff | None:
    """Whether Temporal's view of the task holds a decision back (the mirror follows Temporal).

    Args:
        status: The workflow's, as ``temporal_view.look`` says it (running, completed, closed, gone).
        waiting: Why the step's lateness is not its fault (``temporal_view.waiting_reason``), if so.
        workflow_task_waited_s: How long its scheduled workflow task has waited for a worker to
            start it; None if none waits.
        step_complete_by_s: The step's complete-by.
    """
    if status == "completed":
        return PutOff("the workflow has completed; mirror reconciled", None, reconcile=True)
    if status != "running":
        # The orphan check's: it cleans a closed one up and alerts a gone one, whose rows nothing
        # but an operator will move. The step's next look moves past the check's next round, so
        # that such rows, the oldest due and so first in every batch, are not read again each
        # sweep: as many of them as a batch holds would keep every other due step from a decision.
        later = max(policy.orphan_check_s, policy.max_interval_s, policy.interval_s)
        return PutOff(f"the workflow is {status}: the orphan check's", now + timedelta(seconds=later))
    if waiting is None:
        return None
    if workflow_task_waited_s is not None and workflow_task_waited_s < policy.interval_s:
        # Its workflow task was scheduled just now and waits for a busy worker: look again at the
        # next sweep (a refused order must not wait a whole queue check for a worker that is only
        # slow). One that has waited longer may have no worker at all: the queue check's case.
        return PutOff(waiting, now + timedelta(seconds=policy.interval_s))
    # Look again after the queue check has had its say (a no-worker incident is its alert, not this step's).
    return PutOff(waiting, now + timedelta(seconds=max(policy.queue_check_s, step_complete_by_s, policy.interval_s)))
