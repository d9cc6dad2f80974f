"""bench/latency.py --breakdown: an order's history split into where its time went."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench._breakdown import breakdown, line, medians


def _event(event_id: int, kind: EventType.ValueType, at_ms: int, **attributes: object) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=kind, **attributes)  # type: ignore[arg-type]
    event.event_time.FromMilliseconds(at_ms)
    return event


def _one_activity_order(start_ms: int, activity_ms: int) -> list[HistoryEvent]:
    """Started at ``start_ms``: a workflow task, one activity, a workflow task, completed."""
    t = start_ms
    E = EventType
    return [
        _event(1, E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, t),
        _event(2, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, t),
        _event(3, E.EVENT_TYPE_WORKFLOW_TASK_STARTED, t + 20),  # waited 20
        _event(4, E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, t + 30),  # ran 10
        _event(5, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, t + 30),
        _event(
            6,
            E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            t + 32,  # waited 2
            activity_task_started_event_attributes={"scheduled_event_id": 5},
        ),
        _event(
            7,
            E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            t + 32 + activity_ms,
            activity_task_completed_event_attributes={"scheduled_event_id": 5},
        ),
        _event(8, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, t + 33 + activity_ms),  # 1 between
        _event(9, E.EVENT_TYPE_WORKFLOW_TASK_STARTED, t + 38 + activity_ms),  # waited 5
        _event(10, E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, t + 45 + activity_ms),  # ran 7
        _event(11, E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, t + 45 + activity_ms),
    ]


def test_an_orders_history_splits_into_waits_runs_and_the_rest() -> None:
    found = breakdown(_one_activity_order(1_000, activity_ms=40))
    assert found.wft_wait == [20, 5] and found.wft_run == [10, 7]
    assert found.activity_wait == [2] and found.activity_run == [40]
    assert found.span == 85 and found.total("other") == 1  # the one ms between two events


def test_medians_are_per_part_and_per_turn() -> None:
    found = [breakdown(_one_activity_order(0, activity_ms=ms)) for ms in (10, 40, 70)]
    m = medians(found)
    assert m["activity_run"] == 40 and m["activity_run_1"] == 40
    assert m["wft_wait"] == 25 and (m["wft_wait_1"], m["wft_wait_2"]) == (20, 5)
    assert line(found).startswith("wft_wait=25.0 (20/5) wft_run=17.0 (10/7) activity_wait=2.0 (2)")
