"""A remote service's Agents on its own task queue (task_models/queues.py), on real parts.

Payment's settings give it a queue of its own; the stack's worker polls the workflow queue and
inventory's and shipping's queues only (SAS_WORKER__QUEUES), so payment's calls wait in
payment's queue. The Supervisor raises the
no-worker incident for that queue - but not while payment's breaker is holding the work on
purpose - and a payment-only worker, started apart, serves it: the order completes, the
incident resolves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest_asyncio
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from sas.breaker.rows import force
from sas.settings import ServicesSettings, SupervisorSettings, WorkerSettings
from sas.state_store.alerts import list_alerts
from sas.supervisor.models import SweepStats
from sas.task_models import MirrorStamp, StepCall, StepResult, TaskState, seals
from sas.workflows import ALL_WORKFLOWS
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import sas
from tests.helpers import fresh_id, wait_until
from tests.stack import ADMIN_TOKEN, Stack, more_workers, order, start_stack


@pytest_asyncio.fixture
async def no_payment_worker(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str
) -> AsyncIterator[Stack]:
    supervisor = SupervisorSettings(
        interval_s=0.5,
        failure_threshold=3,
        overdue_grace_s=1.5,
        cooldown_tries=0,
        queue_check_s=0.5,
        queue_idle_after_s=0.5,
        poller_stale_s=5.0,
        workflow_id=fresh_id("supervisor-sq"),
    )
    async with start_stack(
        client,
        temporal_address,
        services.url,
        db_url,
        supervisor_settings=supervisor,
        # Payment's Agents on its own queue (its settings ask for one), which this worker leaves unpolled.
        services=ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, payment={"own_queue": True}),
        worker=WorkerSettings(queues=["workflows", "inventory", "shipping"]),
    ) as running:
        yield running


async def unpolled(stack: Stack, queue: str) -> list[Any]:
    """The one unpolled-queues incident, when it names ``queue`` (one for every queue)."""
    async with stack.sessions() as session:
        return [
            a
            for a in await list_alerts(session, None, 1000)
            if a.kind == "queue_unpolled" and f"queue {queue};" in a.message
        ]


async def test_a_service_queue_nobody_polls_is_an_incident_unless_its_breaker_holds_it(
    no_payment_worker: Stack,
) -> None:
    stack = no_payment_worker
    payment_queue = f"{stack.settings.temporal.task_queue}.payment"
    supervisor = stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id)

    async def stats() -> SweepStats:
        return await supervisor.query("stats", result_type=SweepStats)

    # Payment's breaker forced open: its calls are held on purpose, no incident.
    async with stack.sessions() as session:
        await force(session, "payment", "open", "test", "held on purpose", datetime_now())
    task_id = fresh_id("sq")
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("reserve") == "Processed", what="reserved")
    checks = (await stats()).queue_checks
    await wait_until(
        stats, lambda s: s.queue_checks >= checks + 3 and s.breakers_holding == ["payment"], what="queue checks"
    )
    assert await unpolled(stack, payment_queue) == []

    # Released, with nobody polling payment's queue: one incident, naming the queue.
    async with stack.sessions() as session:
        await force(session, "payment", "closed", "test", "released", datetime_now())
    [alert] = await wait_until(lambda: unpolled(stack, payment_queue), bool, what="the unpolled incident")
    assert alert.status == "open" and f"no activity worker is polling queue {payment_queue}" in alert.message

    # A worker for payment alone (SAS_WORKER__QUEUES=["payment"]) serves it.
    settings = stack.settings.model_copy(update={"worker": WorkerSettings(queues=["payment"])})
    async with more_workers(stack, settings, "payment-worker", ALL_WORKFLOWS) as payment_only:
        assert [w.task_queue for w in payment_only.workers] == [payment_queue]
        assert (await handle.result()).state == TaskState.PROCESSED
        await wait_until(
            lambda: unpolled(stack, payment_queue), lambda a: [x.status for x in a] == ["resolved"], what="resolved"
        )
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge", "ship"]


def datetime_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


# Named as the order's own workflow: sas's workers run an order's Agents for it alone
# (sas/runtime/activity_owners.py), and it stands for an order accepted before service queues.
@workflow.defn(name="OrderWorkflow", sandboxed=False)
class AgentOnTheWorkflowQueue:
    """Schedules an Agent where tasks accepted before service queues have theirs: on the
    workflow queue itself (their plans name no queue)."""

    @workflow.run
    async def run(self, queue: str, call: StepCall) -> StepResult:
        # Sealed as sas's Scheduler seals a call (this process's worker holds the same key).
        info = workflow.info()
        sealed = call.model_copy(
            update={"seal": seals.call_seal(info.workflow_id, info.run_id, "inventory.reserve", call)}
        )
        return await workflow.execute_activity(
            "inventory.reserve",
            sealed,
            task_queue=queue,
            result_type=StepResult,
            start_to_close_timeout=timedelta(seconds=10),
        )


async def test_agents_of_tasks_from_before_service_queues_are_still_served(stack: Stack) -> None:
    task_id = fresh_id("old-style")
    call = StepCall(
        task_id=task_id,
        task_type="order",
        step="reserve",
        position=0,
        idempotency_key=f"{task_id}:reserve",
        payload=order().model_dump(mode="json"),
        stamp=MirrorStamp(seq=1),
    )
    own_queue = fresh_id("old-style-q")
    async with Worker(stack.client, task_queue=own_queue, workflows=[AgentOnTheWorkflowQueue]):
        result = await stack.client.execute_workflow(
            "OrderWorkflow",
            args=[stack.settings.temporal.task_queue, call],
            id=task_id,
            task_queue=own_queue,
            result_type=StepResult,
        )
    assert result.data["reservation_id"].startswith("rsv_")
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve"]


@pytest_asyncio.fixture
async def shipping_limited(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    registry = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, shipping={"max_concurrency": 5})
    async with start_stack(client, temporal_address, services.url, sqlite_url, services=registry) as running:
        yield running


async def test_only_a_service_whose_settings_ask_for_one_gets_its_own_queue(shipping_limited: Stack) -> None:
    """Shipping has a limit on calls in flight, so its Agents wait in a queue of their own; the
    other services' Agents share the workflow's queue, where the worker that schedules a call is
    handed it with the same workflow task's answer."""
    stack = shipping_limited
    queue = stack.settings.temporal.task_queue
    task_id = fresh_id("where")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    history = await stack.client.get_workflow_handle(task_id).fetch_history()
    scheduled = {
        e.activity_task_scheduled_event_attributes.activity_type.name: e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert scheduled["inventory.reserve"] == queue and scheduled["payment.charge"] == queue, scheduled
    assert scheduled["shipping.ship"] == f"{queue}.shipping", scheduled
    # `sas services` says where each service's Agents are planned, under the same settings.
    shown = await sas(stack, "services", "--json", env={"SAS_SERVICES__SHIPPING__MAX_CONCURRENCY": "5"})
    assert shown.returncode == 0, shown.stderr
    rows = {r["service"]: r["queue"] for r in json.loads(shown.stdout)}
    order_services = {name: rows[name] for name in ("inventory", "payment", "shipping")}
    assert order_services == {"inventory": queue, "payment": queue, "shipping": f"{queue}.shipping"}
