"""policy.decide: the escalation ladder, rung by rung (pure, no I/O)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from sas.settings import SupervisorSettings
from sas.supervisor.decide.policy import decide, rung
from sas.supervisor.models import DueStep, SupervisorPolicy
from sas.task_models.ladder import Ladder

T0 = datetime(2030, 1, 1, tzinfo=UTC)
POLICY = SupervisorPolicy(failure_threshold=3, overdue_grace_s=1.0)
LADDER = Ladder(
    retries=2,
    retry_delay_s=10,
    retry_backoff=3,
    retry_max_delay_s=60,
    cooldown_s=3600,
    cooldown_tries=2,
    outcome="compensate",
)


def failed(count: int, ladder: Ladder = LADDER, **changes) -> DueStep:
    base = {
        "task_id": "t-1",
        "task_type": "order",
        "workflow_type": "OrderWorkflow",
        "task_queue": "q",
        "step": "ship",
        "state": "Failed",
        "failure_count": count,
        "version": 7,
        "complete_by": T0,
        "complete_by_s": 5.0,
        "last_error": "503",
        "error_type": "RemoteTransient",
        "updated_at": T0,
        "ladder": ladder,
    }
    base.update(changes)
    return DueStep(**base)


def test_rungs_retry_then_cool_down_then_outcome() -> None:
    assert [rung(n, LADDER)[:2] for n in range(1, 6)] == [
        ("retry", 10),
        ("retry", 30),
        ("retry", 3600),
        ("retry", 3600),
        ("compensate", 0),
    ]
    assert rung(9, Ladder(retries=9, retry_delay_s=10, retry_backoff=3, retry_max_delay_s=60))[1] == 60


@pytest.mark.parametrize("count, delay", [(0, 10), (1, 30), (2, 3600), (3, 3600)])
def test_each_retry_waits_its_delay_after_the_failure_then_retries(count: int, delay: float) -> None:
    early = decide(failed(count), POLICY, T0 + timedelta(seconds=delay - 1))
    assert early.kind == "wait" and early.failure_count == count  # FailureCount does not move while waiting
    assert early.next_look_at == T0 + timedelta(seconds=delay)  # CompleteBy = when the wait ends
    due = decide(failed(count), POLICY, T0 + timedelta(seconds=delay))
    assert due.kind == "retry" and due.failure_count == count + 1 and due.seen_failure_count == count
    assert due.next_look_at > T0 + timedelta(seconds=delay)


def test_cool_down_waits_raise_a_cooldown_alert_but_backoff_waits_do_not() -> None:
    assert decide(failed(0), POLICY, T0).alert is None
    cooling = decide(failed(2), POLICY, T0)
    assert cooling.alert is not None and cooling.alert.kind == "cooldown"
    assert "cool-down try 1 of 2" in cooling.reason


@pytest.mark.parametrize("outcome", ["compensate", "park"])
def test_spent_ladder_applies_the_configured_outcome_with_a_critical_alert(outcome: str) -> None:
    ladder = LADDER.model_copy(update={"outcome": outcome})
    d = decide(failed(4, ladder), POLICY, T0)
    assert d.kind == outcome and d.failure_count == 5
    assert d.alert is not None and d.alert.severity == "critical" and d.alert.kind == "failure_threshold"


def test_permanent_fault_skips_the_ladder() -> None:
    d = decide(failed(0, permanent=True, last_error="card declined"), POLICY, T0)
    assert d.kind == "compensate" and d.failure_count == 1
    assert d.alert is not None and d.alert.kind == "permanent_failure" and "card declined" in d.alert.message
    parked = decide(failed(0, LADDER.model_copy(update={"outcome": "park"}), permanent=True), POLICY, T0)
    assert parked.kind == "park"


def test_overdue_processing_is_counted_extended_and_alerted_when_it_repeats() -> None:
    first = decide(failed(0, state="Processing", locked_by="w-1"), POLICY, T0)
    assert first.kind == "retry" and first.failure_count == 1 and first.alert is None
    assert first.next_look_at == T0 + timedelta(seconds=5 + 1)
    again = decide(failed(1, state="Processing", locked_by="w-1"), POLICY, T0)
    assert again.alert is not None and again.alert.kind == "step_overdue" and again.alert.severity == "warning"
    assert "LockedBy w-1" in again.reason
    spent = decide(failed(4, state="Processing"), POLICY, T0)
    assert spent.kind == "compensate"


def test_undo_failing_is_retried_then_parked() -> None:
    first = decide(failed(3, state="CompensationFailed", undo_retries=0), POLICY, T0 + timedelta(seconds=10))
    assert first.kind == "retry" and first.alert is not None and first.alert.severity == "warning"
    assert first.alert.kind == "compensation_failing"
    waiting = decide(failed(4, state="CompensationFailed", undo_retries=1), POLICY, T0)
    assert waiting.kind == "wait"
    parked = decide(failed(5, state="CompensationFailed", undo_retries=2), POLICY, T0)
    assert parked.kind == "park" and parked.alert is not None and parked.alert.severity == "critical"


def test_ladders_resolve_step_over_task_type_over_default() -> None:
    s = SupervisorSettings(
        failure_threshold=4,
        cooldown_s=60,
        ladders={"order": {"cooldown_tries": 2, "steps": {"ship": {"retries": 0, "outcome": "park"}}}},
    )
    # The default ladder has cool-down tries (seed 002: wait out a long outage); a task type may change them.
    assert s.ladder_for("preorder", "ship").retries == 3 and s.ladder_for("preorder", "ship").cooldown_tries == 3
    charge = s.ladder_for("order", "charge")
    assert (charge.retries, charge.cooldown_tries, charge.cooldown_s, charge.outcome) == (3, 2, 60, "compensate")
    ship = s.ladder_for("order", "ship")
    assert (ship.retries, ship.cooldown_tries, ship.outcome) == (0, 2, "park")


def test_ladders_from_the_environment_override_only_what_they_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from sas.settings import Settings

    monkeypatch.setenv("SAS_SUPERVISOR__RETRIES", "5")
    monkeypatch.setenv("SAS_SUPERVISOR__COOLDOWN_S", "90")
    monkeypatch.setenv("SAS_SUPERVISOR__LADDERS__ORDER__COOLDOWN_TRIES", "1")
    monkeypatch.setenv("SAS_SUPERVISOR__LADDERS__ORDER__STEPS__SHIP__OUTCOME", "park")
    ship = Settings().supervisor.ladder_for("order", "ship")
    # The step's and the task type's given fields win; every other rung is the default ladder's.
    assert ship == Ladder(retries=5, cooldown_s=90, cooldown_tries=1, outcome="park")
    assert type(ship) is Ladder  # the resolved ladder carries none of the Supervisor's other settings


def test_shards_cover_every_bucket_once() -> None:
    s = SupervisorSettings(shards=3)
    ranges = [s.bucket_range(i) for i in range(3)]
    assert ranges[0][0] == 0 and ranges[-1][1] == 4096
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(
        s.bucket_range(s.shard_for_bucket(b))[0] <= b < s.bucket_range(s.shard_for_bucket(b))[1] for b in range(4096)
    )
    assert SupervisorSettings(shards=1).workflow_id_for_task("x") == "sas-supervisor"
    assert SupervisorSettings(shards=3).workflow_id_for_task("x").startswith("sas-supervisor-")
