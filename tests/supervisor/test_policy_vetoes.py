"""The Supervisor's vetoes, pure: what holds a decision back, judged from facts act/vetoes.py fetches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sas.breaker.model import BreakerView
from sas.supervisor.decide.policy import breaker_holds, temporal_says_wait
from sas.supervisor.models import SupervisorPolicy

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
POLICY = SupervisorPolicy(interval_s=5, queue_check_s=15)


def test_a_held_service_puts_the_decision_off_until_its_breaker_may_probe() -> None:
    assert breaker_holds(None, NOW, POLICY) is None
    view = BreakerView(service="payment", state="open", outage_since=NOW, retry_at=NOW + timedelta(seconds=30))
    held = breaker_holds(view, NOW, POLICY)
    assert held is not None and held.held and held.look_again_at == NOW + timedelta(seconds=30)
    assert "the payment breaker holds its steps" in held.why
    soon = BreakerView(service="payment", state="open", retry_at=NOW)
    again = breaker_holds(soon, NOW, POLICY)
    assert again is not None and again.look_again_at == NOW + timedelta(seconds=5)  # at least an interval


def test_temporal_holds_a_decision_back_only_when_the_step_is_not_at_fault() -> None:
    assert temporal_says_wait("running", None, None, 10, NOW, POLICY) is None  # decide
    done = temporal_says_wait("completed", None, None, 10, NOW, POLICY)
    assert done is not None and done.reconcile and done.look_again_at is None
    closed = temporal_says_wait("closed", None, None, 10, NOW, POLICY)
    # the orphan check's: looked at again after its next round and the longest sleep, not each sweep
    assert closed is not None and closed.look_again_at == NOW + timedelta(seconds=60) and not closed.reconcile
    busy = temporal_says_wait("running", "its workflow task waits", 1.0, 10, NOW, POLICY)
    assert busy is not None and busy.look_again_at == NOW + timedelta(seconds=5)  # a busy worker: next sweep
    long = temporal_says_wait("running", "waits for a worker", 60.0, 40, NOW, POLICY)
    assert long is not None and long.look_again_at == NOW + timedelta(seconds=40)  # after its complete-by
