"""A workflow whose workflow task keeps failing (e.g. code that no longer matches its history)
cannot act on any signal. The Supervisor says so, once, instead of climbing its ladder blindly."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from sas import state_store
from sas.settings import SupervisorSettings
from sas.state_store.queries import alerts_for, decisions_for
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import OperatorRequest, TaskState, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.stack import start_stack


@workflow.defn(name="OrderWorkflow", sandboxed=False)
class IncompatibleOrderWorkflow:
    """Stands for a deployment whose OrderWorkflow no longer replays the old histories."""

    @workflow.run
    async def run(self, order: Any) -> None:
        raise RuntimeError("this code does not match the workflow's history")


async def test_a_workflow_that_cannot_make_progress_raises_one_alert(
    client: Client, temporal_address: str, services, sqlite_url: str
) -> None:
    task_id = fresh_id("stuck")
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=task_id)
        handle = await stack.submit(task_id)
        await wait_until(
            lambda: handle.query("status", result_type=TaskStatus),
            lambda s: s.state == TaskState.FAILED,
            what="the order to wait for a decision",
        )
        settings = stack.settings
    # The old worker is gone; a worker with incompatible code takes over the queue.
    settings = settings.model_copy(
        update={
            "supervisor": SupervisorSettings(
                cooldown_tries=0,
                interval_s=0.5,
                max_interval_s=1.0,
                orphan_after_s=1.0,
                orphan_check_s=0.5,
                workflow_id=fresh_id("sup-stuck"),
            )
        }
    )
    engine = state_store.create_engine(settings.database)
    sessions = state_store.session_factory(engine)
    try:
        async with Worker(
            client,
            task_queue=settings.temporal.task_queue,
            workflows=[IncompatibleOrderWorkflow],
            max_cached_workflows=0,
        ):
            await handle.signal("retry", OperatorRequest(by="test"))
            async with build_worker(client, settings, sessions, "stuck-supervisor"):
                await ensure_supervisor_running(client, settings)

                async def stuck_alerts() -> list[Any]:
                    async with sessions() as session:
                        return [a for a in await alerts_for(session, task_id) if a.kind == "workflow_stuck"]

                alerts = await wait_until(
                    stuck_alerts, lambda a: len(a) == 1, timeout=90, what="a workflow_stuck alert"
                )
                # Once: three more sweeps raise no second one.
                supervisor = client.get_workflow_handle(settings.supervisor.workflow_id)
                seen = await supervisor.query("sweeps", result_type=int)
                await wait_until(
                    lambda: supervisor.query("sweeps", result_type=int),
                    lambda n: n >= seen + 3,
                    what="three more sweeps",
                )
                async with sessions() as session:
                    stuck = [a for a in await alerts_for(session, task_id) if a.kind == "workflow_stuck"]
                    climbed = [d.kind for d in await decisions_for(session, task_id) if d.kind != "wait"]
                assert [a.id for a in stuck] == [alerts[0].id]
                await client.get_workflow_handle(settings.supervisor.workflow_id).terminate("test over")
    finally:
        await engine.dispose()
    assert alerts[0].severity == "critical" and alerts[0].status == "open"
    assert "non-determinism" in alerts[0].message and "workflow.patched" in alerts[0].suggested_action
    assert alerts[0].task_id == task_id
    await handle.terminate("test over")
    # No decision for a workflow that cannot act: a queued compensate would run once fixed code is deployed.
    assert climbed == []
