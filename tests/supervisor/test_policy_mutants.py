"""policy.decide and its vetoes, pinned whole: every branch's decision compared field by field,
its reason and alert word for word, each bound at its edge (the cases ``python -m bench.mutation
policy`` found no test held; docs/testing.md, "Mutation testing"). Pure, no server."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from sas.breaker.model import BreakerView
from sas.supervisor.decide.policy import breaker_holds, decide, retry_delay, rung, temporal_says_wait
from sas.supervisor.models import AlertSpec, Decision, DecisionKind, DueStep, SupervisorPolicy
from sas.task_models.ladder import Ladder
from sas.task_models.seals import FOREIGN_RESULT
from tests.supervisor.test_policy import LADDER, POLICY, T0, failed

PARK = LADDER.model_copy(update={"outcome": "park"})
FAILED = "Failed: RemoteTransient: 503"
RUNNING_SINCE = "past CompleteBy 2030-01-01T00:00:00+00:00"
SPENT = "ladder spent (2 retries, 2 cool-down tries)"
HINT = "fix the cause, then `sas retry t-1` or `sas compensate t-1`"
FORWARD_HINT = (
    "past the point of no return: fix the cause, then `sas retry t-1`; undoing it needs"
    " `sas compensate t-1 --force --reason WHY`"
)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def expected(
    step: DueStep,
    kind: DecisionKind,
    reason: str,
    alert: AlertSpec | None,
    *,
    at: datetime,
    n: int,
) -> Decision:
    return Decision(
        task_id="t-1",
        step="ship",
        kind=kind,
        failure_count=n,
        seen_failure_count=step.failure_count,
        seen_version=7,
        epoch=step.resets,
        observed_state=step.state,
        reason=reason,
        next_look_at=at,
        last_error=step.last_error,
        alert=alert,
    )


def spent(count: int, undoing: bool, hint: str = HINT) -> AlertSpec:
    return AlertSpec(
        severity="critical",
        kind="failure_threshold",
        message=f"task t-1: step ship failed {count} times; " + ("compensating" if undoing else "parked as Error"),
        suggested_action="look at the remote service's health; the task is being undone" if undoing else hint,
    )


# ---------------------------------------------------------------- the rungs


def test_each_rung_is_named_and_timed_at_its_edges() -> None:
    assert rung(1, LADDER) == ("retry", 10, "retry 1 of 2")
    assert rung(2, LADDER) == ("retry", 30, "retry 2 of 2")
    assert rung(3, LADDER) == ("retry", 3600, "cool-down try 1 of 2")
    assert rung(4, LADDER) == ("retry", 3600, "cool-down try 2 of 2")
    assert rung(5, LADDER) == ("compensate", 0.0, SPENT)
    assert rung(5, PARK) == ("park", 0.0, SPENT)


def test_a_retry_delay_grows_by_the_backoff_from_the_first_and_stops_at_its_cap() -> None:
    assert [retry_delay(n, LADDER) for n in (1, 2, 3, 4)] == [10, 30, 60, 60]
    assert retry_delay(0, LADDER) == 10  # never below the first delay


# ---------------------------------------------------------------- a Failed step on the ladder


def test_a_failed_step_waits_for_its_rung_to_the_second_then_retries() -> None:
    step = failed(0, resets=2)
    wait = decide(step, POLICY, s(9))
    assert wait == expected(step, "wait", f"{FAILED}; retry 1 of 2 at 2030-01-01T00:00:10+00:00", None, at=s(10), n=0)
    due = decide(step, POLICY, s(10))
    # Looked at again one complete-by (5 s) and the grace (1 s) after the decision.
    assert due == expected(step, "retry", f"{FAILED}; retry 1 of 2: asking the Scheduler to retry", None, at=s(16), n=1)


def test_a_failed_step_with_no_time_written_waits_its_delay_from_now() -> None:
    step = failed(1, updated_at=None)
    assert decide(step, POLICY, s(100)) == expected(
        step, "wait", f"{FAILED}; retry 2 of 2 at 2030-01-01T00:02:10+00:00", None, at=s(130), n=1
    )


def test_only_a_cool_down_wait_raises_an_alert_the_last_quick_retry_does_not() -> None:
    last_quick = failed(1)
    assert decide(last_quick, POLICY, T0).alert is None
    cooling = failed(2)
    assert decide(cooling, POLICY, T0) == expected(
        cooling,
        "wait",
        f"{FAILED}; cool-down try 1 of 2 at 2030-01-01T01:00:00+00:00",
        AlertSpec(
            severity="warning",
            kind="cooldown",
            message="task t-1: step ship failed 3 times; cooling down 3600s before cool-down try 1 of 2",
            suggested_action="fix the remote service; or `sas retry t-1` to try now",
        ),
        at=s(3600),
        n=2,
    )
    assert decide(cooling, POLICY, s(3600)).kind == "retry"


def test_a_spent_ladder_compensates_or_parks_in_so_many_words() -> None:
    step = failed(4)
    assert decide(step, POLICY, T0) == expected(
        step, "compensate", f"{FAILED}; {SPENT}: undoing the task", spent(5, undoing=True), at=s(6), n=5
    )
    parked = failed(4, PARK)
    assert decide(parked, POLICY, T0) == expected(
        parked, "park", f"{FAILED}; {SPENT}: parked for an operator", spent(5, undoing=False), at=s(6), n=5
    )


@pytest.mark.parametrize("ladder", [LADDER, PARK])
def test_a_spent_ladder_past_the_pivot_parks_and_says_it_is_never_undone(ladder: Ladder) -> None:
    step = failed(4, ladder, pivot="forward_only")
    assert decide(step, POLICY, T0) == expected(
        step,
        "park",
        f"{FAILED}; {SPENT}: parked for an operator; past the point of no return, never undone",
        spent(5, undoing=False, hint=FORWARD_HINT),
        at=s(6),
        n=5,
    )


def test_a_problem_with_no_error_type_or_detail_says_so() -> None:
    step = failed(4, error_type=None, last_error=None)
    assert decide(step, POLICY, T0).reason == f"Failed: error: no detail; {SPENT}: undoing the task"


# ---------------------------------------------------------------- refused for good


def test_a_permanent_failure_compensates_with_a_warning() -> None:
    step = failed(0, permanent=True, error_type="RemoteRejected", last_error="card declined")
    assert decide(step, POLICY, T0) == expected(
        step,
        "compensate",
        "Failed: RemoteRejected: card declined; permanent failure: retrying cannot help, undoing the task",
        AlertSpec(
            severity="warning",
            kind="permanent_failure",
            message="task t-1: step ship was rejected: card declined",
            suggested_action="the task is being compensated; tell the customer or fix the data and resubmit",
        ),
        at=s(6),
        n=1,
    )


def test_a_permanent_failure_of_a_parking_ladder_parks_with_a_critical_alert() -> None:
    step = failed(0, PARK, permanent=True)
    assert decide(step, POLICY, T0) == expected(
        step,
        "park",
        f"{FAILED}; permanent failure: retrying cannot help, parked for an operator",
        AlertSpec(
            severity="critical",
            kind="permanent_failure",
            message="task t-1: step ship was rejected: 503",
            suggested_action=HINT,
        ),
        at=s(6),
        n=1,
    )


def test_a_permanent_failure_past_the_pivot_parks_never_undone() -> None:
    got = decide(failed(0, permanent=True, pivot="forward_only"), POLICY, T0)
    assert got.kind == "park"
    assert got.reason == (
        f"{FAILED}; permanent failure: retrying cannot help, parked for an operator; past the point of no return, never undone"
    )
    assert got.alert == AlertSpec(
        severity="critical",
        kind="permanent_failure",
        message="task t-1: step ship was rejected: 503",
        suggested_action=FORWARD_HINT,
    )
    # The pivot refused for good did nothing: no suffix, the steps before it are undone.
    pivot = decide(failed(0, permanent=True, pivot="pivot"), POLICY, T0)
    assert pivot.kind == "compensate"
    assert pivot.reason == f"{FAILED}; permanent failure: retrying cannot help, undoing the task"


def test_a_result_no_agent_sealed_is_undone_by_its_lookup_or_parked_past_the_pivot() -> None:
    step = failed(0, permanent=True, error_type=FOREIGN_RESULT)
    assert decide(step, POLICY, T0) == expected(
        step,
        "compensate",
        "Failed: ForeignResult: 503; a result no Agent of sas sealed: not taken; "
        "undoing the task, its lookup deciding what was done",
        None,
        at=s(6),
        n=1,
    )
    past = failed(0, permanent=True, error_type=FOREIGN_RESULT, pivot="forward_only")
    assert decide(past, POLICY, T0) == expected(
        past,
        "park",
        "Failed: ForeignResult: 503; a result no Agent of sas sealed: not taken; parked",
        None,
        at=s(6),
        n=1,
    )


def test_a_foreign_error_type_not_marked_permanent_climbs_the_ladder() -> None:
    assert decide(failed(0, error_type=FOREIGN_RESULT), POLICY, T0).kind == "wait"


# ---------------------------------------------------------------- a step past its CompleteBy


def test_an_overrunning_step_is_extended_then_alerted_from_its_second_overrun() -> None:
    first = failed(0, state="Processing", locked_by="w-1")
    assert decide(first, POLICY, T0) == expected(
        first,
        "retry",
        f"Processing {RUNNING_SINCE} (LockedBy w-1); retry 1 of 2; CompleteBy extended",
        None,
        at=s(6),
        n=1,
    )
    again = failed(1, state="Processing")
    assert decide(again, POLICY, T0) == expected(
        again,
        "retry",
        f"Processing {RUNNING_SINCE} (LockedBy nobody); retry 2 of 2; CompleteBy extended",
        AlertSpec(
            severity="warning",
            kind="step_overdue",
            message="task t-1: step ship overran its complete-by 2 times (LockedBy nobody)",
            suggested_action="check the task workers and the remote service; Temporal is still retrying",
        ),
        at=s(6),
        n=2,
    )


def test_an_overrunning_step_spends_its_ladder_into_an_undo() -> None:
    step = failed(4, state="Processing", complete_by=None)
    assert decide(step, POLICY, T0) == expected(
        step,
        "compensate",
        f"Processing past CompleteBy ? (LockedBy nobody); overran 5 times, {SPENT}: undoing the task",
        spent(5, undoing=True),
        at=s(6),
        n=5,
    )


def test_an_overrunning_step_of_a_parking_ladder_is_extended_with_a_critical_alert() -> None:
    got = decide(failed(4, PARK, state="Processing"), POLICY, T0)
    assert got.kind == "retry" and got.failure_count == 5
    assert got.reason == f"Processing {RUNNING_SINCE} (LockedBy nobody); {SPENT}; CompleteBy extended"
    assert got.alert is not None and (got.alert.kind, got.alert.severity) == ("step_overdue", "critical")


def test_an_overrunning_undo_is_extended_and_critical_from_the_threshold() -> None:
    first = failed(0, state="Compensating")
    reason = f"Compensating {RUNNING_SINCE} (LockedBy nobody); undo still running; CompleteBy extended"
    assert decide(first, POLICY, T0) == expected(first, "retry", reason, None, at=s(6), n=1)

    def overdue(count: int, severity: str) -> AlertSpec:
        return AlertSpec(
            severity=severity,
            kind="compensation_overdue",
            message=f"task t-1: undo of ship overran its complete-by {count} times",
            suggested_action="check that a task worker is running and the remote service answers",
        )

    second = failed(1, state="Compensating")
    assert decide(second, POLICY, T0) == expected(second, "retry", reason, overdue(2, "warning"), at=s(6), n=2)
    third = failed(2, state="Compensating")  # FailureCount 3 = failure_threshold
    assert decide(third, POLICY, T0) == expected(third, "retry", reason, overdue(3, "critical"), at=s(6), n=3)


# ---------------------------------------------------------------- an undo that failed


def failing_undo(tries: int, severity: str = "warning") -> AlertSpec:
    return AlertSpec(
        severity=severity,
        kind="compensation_failing",
        message=f"task t-1: undoing step ship failed; Supervisor retry {tries} of 2",
        suggested_action="check the remote service; the undo is being retried",
    )


def test_a_failed_undo_waits_its_delay_then_is_retried() -> None:
    step = failed(3, state="CompensationFailed", undo_retries=0)
    problem = "CompensationFailed: RemoteTransient: 503"
    assert decide(step, POLICY, s(9)) == expected(
        step, "wait", f"{problem}; undo retry 1 of 2 at 2030-01-01T00:00:10+00:00", failing_undo(1), at=s(10), n=3
    )
    assert decide(step, POLICY, s(10)) == expected(
        step, "retry", f"{problem}; retrying the undo (1 of 2)", failing_undo(1), at=s(16), n=4
    )


def test_a_failed_undo_is_retried_up_to_the_ladders_retries_then_parked() -> None:
    last = failed(3, state="CompensationFailed", undo_retries=1, updated_at=None)
    # Its second retry waits 30 s from now (no time written), and is still a retry, not a park.
    assert decide(last, POLICY, T0) == expected(
        last,
        "wait",
        "CompensationFailed: RemoteTransient: 503; undo retry 2 of 2 at 2030-01-01T00:00:30+00:00",
        failing_undo(2),
        at=s(30),
        n=3,
    )
    spent_undo = failed(3, state="CompensationFailed", undo_retries=2)
    assert decide(spent_undo, POLICY, T0) == expected(
        spent_undo,
        "park",
        "CompensationFailed: RemoteTransient: 503; undo failed after 2 Supervisor retries: parked for an operator",
        AlertSpec(
            severity="critical",
            kind="compensation_failing",
            message="task t-1: undoing step ship keeps failing; parked",
            suggested_action=(
                "fix the remote service, then `sas compensate t-1` to retry the undo; or undo by hand and record it"
            ),
        ),
        at=s(6),
        n=4,
    )


# ---------------------------------------------------------------- the vetoes

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=T0.tzinfo)
VETO_POLICY = SupervisorPolicy(interval_s=5, queue_check_s=15)


def test_a_held_service_says_since_when_from_its_outage_or_its_state() -> None:
    outage = BreakerView(service="payment", state="open", since=NOW, outage_since=NOW - timedelta(minutes=5))
    held = breaker_holds(outage, NOW, VETO_POLICY)
    assert held is not None
    assert held.why == "the payment breaker holds its steps (open since 2026-11-28T11:55:00+00:00)"
    assert (held.look_again_at, held.held, held.reconcile) == (NOW + timedelta(seconds=5), True, False)
    since = breaker_holds(BreakerView(service="payment", since=NOW - timedelta(minutes=1)), NOW, VETO_POLICY)
    assert since is not None and since.why.endswith("(open since 2026-11-28T11:59:00+00:00)")
    unknown = breaker_holds(BreakerView(service="payment"), NOW, VETO_POLICY)
    assert unknown is not None and unknown.why.endswith("(open since 2026-11-28T12:00:00+00:00)")


def test_a_held_service_is_looked_at_again_at_least_a_second_later() -> None:
    fast = SupervisorPolicy(interval_s=0.25)
    held = breaker_holds(BreakerView(service="payment"), NOW, fast)
    assert held is not None and held.look_again_at == NOW + timedelta(seconds=1)


def test_temporal_says_wait_in_so_many_words() -> None:
    done = temporal_says_wait("completed", None, None, 10, NOW, VETO_POLICY)
    assert done is not None
    assert (done.why, done.look_again_at, done.held, done.reconcile) == (
        "the workflow has completed; mirror reconciled",
        None,
        False,
        True,
    )
    gone = temporal_says_wait("gone", "ignored", None, 10, NOW, VETO_POLICY)
    assert gone is not None
    assert (gone.why, gone.look_again_at, gone.held, gone.reconcile) == (
        "the workflow is gone: the orphan check's",
        NOW + timedelta(seconds=60),  # max_interval_s, the longest of the three
        False,
        False,
    )
    rare_checks = SupervisorPolicy(interval_s=5, max_interval_s=30, orphan_check_s=90)
    later = temporal_says_wait("closed", None, None, 10, NOW, rare_checks)
    assert later is not None and later.look_again_at == NOW + timedelta(seconds=90)
    slow = SupervisorPolicy(interval_s=120, max_interval_s=30, orphan_check_s=15)
    slowest = temporal_says_wait("gone", None, None, 10, NOW, slow)
    assert slowest is not None and slowest.look_again_at == NOW + timedelta(seconds=120)


def test_a_workflow_task_waiting_one_interval_is_the_queue_checks_case() -> None:
    busy = temporal_says_wait("running", "waits", 4.9, 10, NOW, VETO_POLICY)
    assert busy is not None and (busy.why, busy.look_again_at) == ("waits", NOW + timedelta(seconds=5))
    assert not busy.held and not busy.reconcile
    edge = temporal_says_wait("running", "waits", 5.0, 10, NOW, VETO_POLICY)
    assert edge is not None and edge.look_again_at == NOW + timedelta(seconds=15)  # the queue check's interval
    none_waits = temporal_says_wait("running", "paused", None, 10, NOW, VETO_POLICY)
    assert none_waits is not None and none_waits.look_again_at == NOW + timedelta(seconds=15)
    assert (none_waits.why, none_waits.held, none_waits.reconcile) == ("paused", False, False)
    slow_interval = SupervisorPolicy(interval_s=50, queue_check_s=15)
    latest = temporal_says_wait("running", "paused", None, 10, NOW, slow_interval)
    assert latest is not None and latest.look_again_at == NOW + timedelta(seconds=50)
