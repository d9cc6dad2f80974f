"""The task client's reads, from a team's own code: a task's story, the tasks, the alerts and
the services' breakers, each a typed view, and the operator's hand on alerts and breakers.
What ``sas show``, ``list``, ``alerts`` and ``services`` print is these calls' answer. Real dev
server, real services, real SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sas.api.client import InvalidInput, TaskClient, TaskNotFound, Unreachable
from sas.state_store.queries import audit_for
from sas.state_store.tables import Alert
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


async def _parked_on_charge(stack: Stack, tasks: TaskClient) -> str:
    """A task whose charge is refused for good, parked by an operator: steps, attempts, an audit entry."""
    task_id = fresh_id("reads")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    await tasks.submit("order", order(), task_id=task_id)

    def charge_failed(view: Any) -> bool:
        return any(s["name"] == "charge" and s["state"] == "Failed" for s in view.steps)

    await wait_until(lambda: tasks.status(task_id), charge_failed, what=f"{task_id}: charge Failed")
    await tasks.park(task_id, reason="card blocked")
    # The park is accepted when it returns; the workflow records it (the step Error, the
    # operator's audit entry) as it applies it, a moment later.
    await wait_until(
        lambda: tasks.show(task_id),
        lambda story: any(a["action"] == "park" for a in story.operator_actions),
        what=f"{task_id}: the park recorded",
    )
    return task_id


async def test_a_tasks_story_and_the_task_list(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="support-desk")
    task_id = await _parked_on_charge(stack, tasks)

    story = await tasks.show(task_id)
    assert (story.told, story.state) == ("task", "Error")
    assert [s["name"] for s in story.steps] == ["reserve", "charge", "ship"]
    charge = next(s for s in story.steps if s["name"] == "charge")
    assert charge["state"] == "Error" and "rejected" in charge["last_error"]
    # One time line, oldest first: the attempts and the operator's park.
    whats = [(e["step"], e["what"]) for e in story.history]
    assert ("reserve", "attempt 1") in whats and ("charge", "attempt 1") in whats
    assert ("charge", "operator: park") in whats
    assert [e["at"] for e in story.history] == sorted(e["at"] for e in story.history)
    [park] = [a for a in story.operator_actions if a["action"] == "park"]
    assert (park["actor"], park["reason"]) == ("support-desk", "card blocked")

    listed = await tasks.list()
    mine = next(t for t in listed.tasks if t.task_id == task_id)
    assert (mine.state, mine.task_type, mine.current_step, mine.in_mirror) == ("Error", "order", "charge", True)
    assert mine.failure_count == max(s["failure_count"] for s in story.steps)
    # A state in any case, answered as the state store spells it.
    in_error = await tasks.list("error")
    assert in_error.state == "Error" and [t.task_id for t in in_error.tasks] == [task_id]
    assert (await tasks.list("Compensated")).tasks == []
    with pytest.raises(InvalidInput, match="unknown state"):
        await tasks.list("exploded")
    with pytest.raises(TaskNotFound, match="no task"):
        await tasks.show(fresh_id("nobody"))

    # A read of the state store needs no Temporal: a lazy client on a Temporal that is not
    # there still tells the story and lists, and says Temporal is away only when asked of it.
    away = stack.settings.model_copy(
        update={"temporal": stack.settings.temporal.model_copy(update={"address": "127.0.0.1:1"})}
    )
    offline = await TaskClient.connect(away, lazy=True)
    assert (await offline.show(task_id)).state == "Error"
    assert task_id in [t.task_id for t in (await offline.list()).tasks]
    with pytest.raises(Unreachable):
        await offline.status(task_id)


async def test_a_delayed_task_is_told_until_it_starts_and_after_it_is_cancelled(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="support-desk")
    task_id = (await tasks.submit("order", order(), delay=timedelta(hours=1))).task_id

    story = await tasks.show(task_id)
    assert (story.told, story.state) == ("delayed", "Scheduled")
    assert story.data["scheduled_for"] > datetime.now(UTC).isoformat()

    await tasks.cancel(task_id, reason="customer changed their mind")
    story = await tasks.show(task_id)
    assert (story.told, story.state, story.data["task"]) == ("actions", None, None)
    [cancel] = story.operator_actions
    assert (cancel["action"], cancel["reason"]) == ("cancel", "customer changed their mind")


async def _raise_alert(stack: Stack, task_id: str, kind: str) -> int:
    now = datetime.now(UTC)
    alert = Alert(
        incident_key=f"{kind}:{task_id}", severity="warning", kind=kind, task_id=task_id, step="charge",
        failure_count=3, message="charge keeps failing", last_error="card declined",
        suggested_action=f"sas compensate {task_id}", status="open", created_at=now, updated_at=now,
        delivery_attempts=0,
    )  # fmt: skip
    async with stack.sessions() as session, session.begin():
        session.add(alert)
    return int(alert.id)


async def test_alerts_are_listed_acknowledged_and_resolved_by_their_state_machine(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings)
    task_id = fresh_id("reads-alert")
    older = await _raise_alert(stack, task_id, "step_failed")
    newer = await _raise_alert(stack, task_id, "overdue")

    found = await tasks.alerts()
    assert [a.id for a in found.alerts] == [newer, older] and found.folded == 0
    first = found.alerts[1]
    assert (first.task_id, first.step, first.failure_count, first.status) == (task_id, "charge", 3, "open")
    assert first.data["suggested_action"] == f"sas compensate {task_id}"

    acked = await tasks.acknowledge_alert(older)
    assert (acked.before, acked.after, acked.changed) == ("open", "acked", True)
    assert [a.id for a in (await tasks.alerts("open")).alerts] == [newer]
    assert [a.id for a in (await tasks.alerts("acked")).alerts] == [older]
    resolved = await tasks.resolve_alert(older)
    assert (resolved.before, resolved.after, resolved.changed) == ("acked", "resolved", True)
    # A resolved alert stays resolved: the move changes nothing, and says so.
    again = await tasks.acknowledge_alert(older)
    assert (again.before, again.after, again.changed) == ("resolved", "resolved", False)
    assert [a.id for a in (await tasks.alerts("all")).alerts] == [newer, older]
    assert [a.id for a in (await tasks.alerts("all", limit=1)).alerts] == [newer]

    with pytest.raises(TaskNotFound, match="no alert 999999"):
        await tasks.resolve_alert(999999)
    with pytest.raises(InvalidInput, match="unknown status"):
        await tasks.alerts("closed")


async def test_services_and_a_breaker_forced_open_and_closed_audited(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="ops-bot")
    queue = stack.settings.temporal.task_queue

    before = {s.service: s for s in await tasks.services()}
    assert {"inventory", "payment", "shipping"} <= set(before)
    assert (before["payment"].state, before["payment"].forced_by, before["payment"].holding) == ("closed", None, False)
    assert before["payment"].queue in (queue, f"{queue}.payment")

    forced = await tasks.force_breaker("payment", "open", by="alice@ops", reason="provider maintenance")
    assert (forced.before, forced.after, forced.by) == ("closed", "open (forced)", "alice@ops")
    payment = next(s for s in await tasks.services() if s.service == "payment")
    assert (payment.state, payment.forced_by, payment.holding, payment.next_probe) == ("open", "alice@ops", True, None)
    closed = await tasks.force_breaker("payment", "closed", reason="maintenance over")
    assert (closed.before, closed.after, closed.by) == ("open (forced)", "closed", "ops-bot")
    assert next(s for s in await tasks.services() if s.service == "payment").state == "closed"

    async with stack.sessions() as session:
        entries = await audit_for(session, "service:payment")
    assert [(e.action, e.actor, e.reason) for e in entries] == [
        ("breaker_open", "alice@ops", "provider maintenance"),
        ("breaker_closed", "ops-bot", "maintenance over"),
    ]
    with pytest.raises(InvalidInput, match="no service named 'fraud'") as unknown:
        await tasks.force_breaker("fraud", "open", reason="x")
    assert unknown.value.field == "service"
    with pytest.raises(InvalidInput, match="reason is required"):
        await tasks.force_breaker("payment", "open", reason=" ")
