"""The mirror follows Temporal, never leads it: workflow resets, a stale row of a finished
task, and a task whose history Temporal no longer has."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest_asyncio
from sqlalchemy import update
from temporalio.client import Client

from sas.settings import SupervisorSettings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.mirror_tables import Step, Task
from sas.state_store.queries import audit_for
from sas.task_models import OperatorRequest, StepPlan, StepPolicyValues, TaskAccepted, TaskResult, TaskState
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import as_json, sas
from tests.e2e.test_task_id_once import supervisor_sweeps
from tests.e2e.test_temporal_cli import temporal_cli
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order, start_stack

DECLINED = "4000000000000002"


@pytest_asyncio.fixture
async def quick_stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    """A Supervisor that looks at quiet tasks after one second."""
    supervisor = SupervisorSettings(
        interval_s=0.5, failure_threshold=3, overdue_grace_s=1.0, orphan_after_s=1.0, orphan_check_s=0.5,
        cooldown_tries=0,
        workflow_id=f"supervisor-{fresh_id('mf')}",
    )  # fmt: skip
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=True) as running:
        # The Supervisor reads its settings at every sweep: quicken this stack's in place.
        fields = {k: getattr(supervisor, k) for k in type(supervisor).model_fields if k != "workflow_id"}
        running.settings.supervisor.__dict__.update(fields)
        yield running


async def _reset(stack: Stack, task_id: str, kind: str) -> str:
    done = await temporal_cli(
        stack.settings.temporal.address,
        *("workflow", "reset", "--workflow-id", task_id, "--type", kind, "--reason", "test reset", "--yes"),
    )
    assert done.returncode == 0, done.stderr
    return (await stack.client.get_workflow_handle(task_id).describe()).run_id


async def _run_id(stack: Stack, task_id: str) -> str:
    return (await stack.client.get_workflow_handle(task_id).describe()).run_id


def _actions(ledger: list[dict[str, object]]) -> list[str]:
    return sorted(str(e["action"]) for e in ledger)


async def test_reset_to_first_workflow_task_of_a_completed_order(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("rst1")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    first_run = await _run_id(stack, task_id)
    before = await stack.record(task_id)
    ledger = _actions(await stack.ledger(task_id))
    assert before is not None and ledger == ["charge", "reserve", "ship"]

    new_run = await _reset(stack, task_id, "FirstWorkflowTask")
    assert new_run != first_run
    result: TaskResult = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED

    async def owned() -> object:
        record = await stack.record(task_id)
        return record and (record.task.run_id, {s.run_id for s in record.steps}, record.task.state)

    await wait_until(owned, lambda o: o == (new_run, {new_run}, "Processed"), what="rows written by the new run")
    after = await stack.record(task_id)
    assert after is not None and after.task.chain_id == before.task.chain_id
    # Versions keep growing across the runs: the new run's writes were applied, none dropped.
    assert all(a.version > b.version for a, b in zip(after.steps, before.steps, strict=True)), (
        "the new run's writes must win"
    )
    # The same idempotency keys: the services acted once.
    assert _actions(await stack.ledger(task_id)) == ledger


async def test_a_reset_that_writes_nothing_new_moves_the_mirrors_run_on_reconcile(stack_no_supervisor: Stack) -> None:
    """A reset to the last workflow task of a completed order: the new run replays the old
    run's writes, which the rows already hold, and completes. ``sas reconcile`` records the
    new run as the task's, audited, and changes nothing else."""
    stack = stack_no_supervisor
    task_id = fresh_id("rst4")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    first_run = await _run_id(stack, task_id)
    before = await stack.record(task_id)
    assert before is not None and before.task.run_id == first_run

    new_run = await _reset(stack, task_id, "LastWorkflowTask")
    assert new_run != first_run
    result = await stack.client.get_workflow_handle(task_id, run_id=new_run, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED
    stale = await stack.record(task_id)
    assert stale is not None and stale.task.run_id == first_run  # the new run wrote nothing new

    planned = as_json(await sas(stack, "reconcile", "--task", task_id, "--dry-run", "--json"))
    assert planned["tasks"][0]["repairs"] == [f"run: {first_run} -> {new_run}"]
    assert (await stack.record(task_id)).task.run_id == first_run  # type: ignore[union-attr]

    done = as_json(await sas(stack, "reconcile", "--task", task_id, "--json"))
    assert done["tasks"][0]["repairs"] == [f"run: {first_run} -> {new_run}"]
    after = await stack.record(task_id)
    assert after is not None and after.task.run_id == new_run and after.task.chain_id == before.task.chain_id
    # Nothing else changed: the same state, versions and times, of the task and of every step.
    assert (after.task.state, after.task.version, after.task.updated_at) == (
        before.task.state,
        before.task.version,
        before.task.updated_at,
    )
    assert [(s.state, s.version, s.run_id) for s in after.steps] == [
        (s.state, s.version, s.run_id) for s in before.steps
    ]
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    assert [(a.action, a.actor, a.changed) for a in audit] == [
        ("reconcile", "supervisor", f"run: {first_run} -> {new_run}")
    ]
    again = as_json(await sas(stack, "reconcile", "--task", task_id, "--json"))
    assert again["tasks"][0]["repairs"] == []  # a second look changes nothing


async def test_the_supervisor_follows_a_reset_that_writes_nothing_new_by_itself(stack: Stack) -> None:
    """The same reset with a Supervisor running: the mirror names the new run within an orphan
    check, with no operator command, audited as the Supervisor's."""
    task_id = fresh_id("rst5")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    first_run = await _run_id(stack, task_id)
    new_run = await _reset(stack, task_id, "LastWorkflowTask")
    assert new_run != first_run
    await stack.client.get_workflow_handle(task_id, run_id=new_run).result()

    async def run_of_record() -> str | None:
        record = await stack.record(task_id)
        return record.task.run_id if record else None

    await wait_until(run_of_record, lambda r: r == new_run, timeout=60, what="the mirror to follow the reset")
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    assert [(a.action, a.actor, a.changed) for a in audit] == [
        ("reconcile", "supervisor", f"run: {first_run} -> {new_run}")
    ]


async def test_reset_mid_saga_to_last_workflow_task_keeps_audit_and_keys(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("rst2")
    fault = await stack.add_fault(endpoint="payment.charge", kind="transient", match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", what="charge Failed")
    await handle.execute_update("request_retry", OperatorRequest(by="alice", reason="before the reset"))
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", what="Failed again")
    first_run = await _run_id(stack, task_id)

    new_run = await _reset(stack, task_id, "LastWorkflowTask")
    assert new_run != first_run
    latest = stack.client.get_workflow_handle(task_id, result_type=TaskResult)
    # The charge still fails, so the new run, too, comes to wait for a decision.
    await wait_until(lambda: _waiting(stack, task_id), what="the new run waiting for a decision")
    await stack.remove_fault(fault)
    await latest.execute_update("request_retry", OperatorRequest(by="bob", reason="after the reset"))
    assert (await latest.result()).state == TaskState.PROCESSED

    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Processed" and record.task.run_id == new_run
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    # Both runs' operator actions are kept: (task, run, seq) does not collide across a reset.
    assert {(a.actor, a.reason, a.run_id) for a in audit} >= {
        ("alice", "before the reset", first_run),
        ("bob", "after the reset", new_run),
    }
    assert _actions(await stack.ledger(task_id)) == ["charge", "reserve", "ship"]


async def _waiting(stack: Stack, task_id: str) -> bool:
    from sas.task_models import TaskStatus

    status = await stack.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
    return any(s.state == "Failed" for s in status.steps)


async def test_reset_after_compensation_undoes_nothing_twice(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("rst3")
    assert (await (await stack.submit(task_id, order(card=DECLINED))).result()).state == TaskState.COMPENSATED
    ledger = _actions(await stack.ledger(task_id))
    assert ledger == ["release", "reserve"]

    new_run = await _reset(stack, task_id, "FirstWorkflowTask")
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.COMPENSATED
    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Compensated" and record.task.run_id == new_run
    # Same keys: the reserve already undone is refused by the service, the release replays.
    assert _actions(await stack.ledger(task_id)) == ledger


async def test_a_stale_row_of_a_completed_task_is_repaired_not_undone(stack: Stack) -> None:
    task_id = fresh_id("stale")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    ledger = await stack.ledger(task_id)
    # A lost write, or a hand edit: the mirror says ship is still running, long past complete-by.
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    async with stack.sessions() as session, session.begin():
        await session.execute(
            update(Step)
            .where(Step.task_id == task_id, Step.name == "ship")
            .values(state="Processing", complete_by=long_ago, locked_by="gone-worker")
        )
        await session.execute(update(Task).where(Task.task_id == task_id).values(state="Processing"))

    async def repaired() -> object:
        record = await stack.record(task_id)
        return record and (record.task.state, {s.name: s.state for s in record.steps}["ship"])

    await wait_until(repaired, lambda r: r == ("Processed", "Processed"), timeout=30, what="the row repaired")
    await supervisor_sweeps(stack, 3)
    assert await stack.ledger(task_id) == ledger  # nothing undone
    assert [d.kind for d in await stack.decisions(task_id) if d.kind != "wait"] == []
    assert len(await stack.alerts(task_id)) <= 1
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    assert [(a.action, a.actor) for a in audit] == [("reconcile", "supervisor")]
    assert "ship: Processing -> Processed" in audit[0].changed


async def test_a_compensated_tasks_step_left_processed_is_repaired_not_undone(stack_no_supervisor: Stack) -> None:
    """The undo's writes were lost while the database was away, and the task's last record
    landed: the mirror says reserve is still Processed under a Compensated task (a chaos run's
    finding). The task is found as one whose rows disagree with it, and reconciling writes what
    Temporal shows; nothing is undone again."""
    from sas.reconciliation.repairs import reconcile_task
    from sas.state_store.queries import finished_disagreeing

    stack = stack_no_supervisor
    task_id = fresh_id("lostundo")
    handle = await stack.submit(task_id, order(card=DECLINED))
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", what="charge Failed")
    # No Supervisor here, so no reconciliation but this test's: the decision is an operator's.
    await handle.execute_update("request_compensate", OperatorRequest(by="alice", reason="card declined"))
    assert (await handle.result()).state == TaskState.COMPENSATED
    ledger = await stack.ledger(task_id)
    async with stack.sessions() as session, session.begin():
        await session.execute(
            update(Step).where(Step.task_id == task_id, Step.name == "reserve").values(state="Processed")
        )
    async with stack.sessions() as session:
        assert task_id in await finished_disagreeing(session, 10_000)

    found = await reconcile_task(stack.sessions, stack.client, task_id)
    assert found is not None
    assert [(r.step, r.before, r.after) for r in found.repairs] == [("reserve", "Processed", "Compensated")]
    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Compensated"
    assert {s.name: s.state for s in record.steps}["reserve"] == "Compensated"
    assert await stack.ledger(task_id) == ledger  # nothing undone twice
    again = await reconcile_task(stack.sessions, stack.client, task_id)
    assert again is not None and again.repairs == []


async def test_a_task_temporal_no_longer_knows_is_never_undone(quick_stack: Stack) -> None:
    stack = quick_stack
    task_id = fresh_id("gone")
    writer = make_step_writer(stack.settings.database)
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    try:
        # The mirror of an order whose workflow history has expired: it says charge is done.
        await writer.accept(
            TaskAccepted(
                task_id=task_id,
                task_type="order",
                workflow_type="OrderWorkflow",
                task_queue=stack.settings.temporal.task_queue,
                payload=order().model_dump(),
                steps=[
                    StepPlan(
                        name=n,
                        position=i,
                        agent=f"svc.{n}",
                        idempotency_key=f"{task_id}:{n}",
                        policy=StepPolicyValues(),
                    )
                    for i, n in enumerate(("reserve", "charge", "ship"))
                ],
                accepted_at=long_ago,
                chain_id="expired-chain",
                run_id="expired-run",
            )
        )
    finally:
        await writer.aclose()
    async with stack.sessions() as session, session.begin():
        await session.execute(
            update(Step).where(Step.task_id == task_id, Step.name.in_(("reserve", "charge"))).values(state="Processed")
        )
        await session.execute(update(Task).where(Task.task_id == task_id).values(state="Processing"))

    alerts = await wait_until(
        lambda: stack.alerts(task_id), lambda a: any(x.kind == "history_gone" for x in a), timeout=30
    )
    await supervisor_sweeps(stack, 3)
    assert [a.kind for a in await stack.alerts(task_id)] == ["history_gone"] == [a.kind for a in alerts]
    assert [d.kind for d in await stack.decisions(task_id)] == []  # no clean-up: nothing is undone
    assert await stack.ledger(task_id) == []
