"""The Supervisor's Prometheus endpoint after a known run: steps by state, decisions by kind,
sweep duration, open alerts, overdue steps and the task queue's backlog."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import func, select
from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from sas.runtime.connect import metrics_runtime
from sas.settings import MetricsSettings, SupervisorSettings
from sas.state_store.alerts import raise_alert
from sas.state_store.tables import Alert
from sas.supervisor.detect.queue_health import QueueActivities
from sas.supervisor.models import QueueCheckInput
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import TaskState
from sas.task_models.queues import service_queue
from sas_demo_services.launcher import free_port
from tests.e2e.test_metrics import samples
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


def metric(text: str, name: str, **labels: str) -> float | None:
    """Sum of one series' samples whose labels include ``labels``; None if there are none."""
    found = [v for key, v in samples(text, name).items() if all(f'{k}="{v_}"' in key for k, v_ in labels.items())]
    return sum(found) if found else None


async def test_supervisor_metrics_after_a_known_run(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    port = free_port()
    settings = stack.settings.model_copy(
        update={
            "metrics": MetricsSettings(supervisor_bind=f"127.0.0.1:{port}"),
            "supervisor": SupervisorSettings(
                interval_s=0.5,
                max_interval_s=1.0,
                queue_check_s=0.5,
                cooldown_tries=0,
                workflow_id=fresh_id("sup-metrics"),
            ),
        }
    )
    client = await Client.connect(
        stack.settings.temporal.address,
        data_converter=pydantic_data_converter,
        runtime=metrics_runtime(settings.metrics.supervisor_bind),
    )
    happy, declined = fresh_id("m-ok"), fresh_id("m-declined")
    async with build_worker(client, settings, stack.sessions, "metrics-supervisor"):
        await ensure_supervisor_running(client, settings)
        assert (await (await stack.submit(happy)).result()).state == TaskState.PROCESSED
        assert (
            await (await stack.submit(declined, order(card="4000000000000002"))).result()
        ).state == TaskState.COMPENSATED

        async def scrape() -> str:
            async with httpx.AsyncClient() as http:
                return (await http.get(f"http://127.0.0.1:{port}/metrics")).text

        def settled(text: str) -> bool:
            return (
                metric(text, "sas_steps", state="Processed") == 3.0
                and metric(text, "sas_steps", state="Skipped") == 1.0
            )

        text = await wait_until(scrape, settled, timeout=60, what="gauges to reflect the run")
        # A backlog of open alerts the test knows: one of its own, which no sweep resolves, beside
        # whatever the run left open. The gauge must come to the store's count, at least one.
        async with stack.sessions() as session, session.begin():
            now = datetime.now(UTC)
            await raise_alert(
                session,
                Alert(
                    incident_key=fresh_id("metrics-test"),
                    severity="warning",
                    kind="metrics_test",
                    message="opened by the metrics test",
                    suggested_action="none: the test's own",
                    created_at=now,
                    updated_at=now,
                ),
            )

        async def gauge_and_store() -> tuple[float | None, int]:
            async with stack.sessions() as session:
                opened = await session.scalar(select(func.count()).select_from(Alert).where(Alert.status == "open"))
            return metric(await scrape(), "sas_alerts_open"), int(opened or 0)

        await wait_until(
            gauge_and_store, lambda seen: seen[1] >= 1 and seen[0] == seen[1], timeout=60, what="the open alerts' gauge"
        )
        text = await scrape()
        await client.get_workflow_handle(settings.supervisor.workflow_id).terminate("test over")

    assert metric(text, "sas_steps", state="Compensated") == 2.0 and metric(text, "sas_steps", state="Failed") == 0.0
    assert metric(text, "sas_steps_overdue") == 0.0
    assert metric(text, "sas_supervisor_decisions", kind="compensate") == 1.0
    assert (metric(text, "sas_supervisor_sweep_duration_count", phase="scan") or 0) >= 1
    assert metric(text, "sas_task_queue_backlog", queue=stack.settings.temporal.task_queue) == 0.0
    assert (metric(text, "sas_task_queue_pollers", queue=stack.settings.temporal.task_queue) or 0) >= 1
    # Each service's own queue, to scale that service's workers on, and its breaker (off here).
    for service in ("inventory", "payment", "shipping"):
        queue = f"{stack.settings.temporal.task_queue}.{service}"
        assert metric(text, "sas_service_backlog", service=service, queue=queue) == 0.0
        assert (metric(text, "sas_service_pollers", service=service, queue=queue) or 0) >= 1
        assert metric(text, "sas_breaker_holding", service=service) == 0.0


@workflow.defn(name="sas-test-charge-waits")
class ChargeWaits:
    """Schedules one payment call on a payment queue nobody polls, and waits for it."""

    @workflow.run
    async def run(self, queue: str) -> None:
        await workflow.execute_activity(
            "payment.charge", {}, task_queue=queue, start_to_close_timeout=timedelta(minutes=5)
        )


async def test_the_backlog_gauges_count_a_known_backlog(stack_no_supervisor: Stack) -> None:
    """A gauge stuck at 0 would pass a settled run's check: here 3 workflow tasks wait on a queue
    nobody polls and 2 payment calls on its payment queue, and the gauges must say so."""
    stack = stack_no_supervisor
    port = free_port()
    queue = fresh_id("unpolled")
    settings = stack.settings.model_copy(
        update={"temporal": stack.settings.temporal.model_copy(update={"task_queue": queue})}
    )
    runtime = metrics_runtime(f"127.0.0.1:{port}")
    assert runtime is not None
    for _ in range(3):
        await stack.client.start_workflow("sas-test-nobody-runs-this", id=fresh_id("waits"), task_queue=queue)
    charging = fresh_id("charging")
    payments = service_queue(queue, "payment")
    async with Worker(
        stack.client, task_queue=charging, workflows=[ChargeWaits], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        for _ in range(2):
            await stack.client.start_workflow(ChargeWaits.run, payments, id=fresh_id("charge"), task_queue=charging)
        environment = ActivityEnvironment(client=stack.client)
        environment.metric_meter = runtime.metric_meter
        checks = QueueActivities(stack.sessions, stack.client, settings)

        scraped: list[str] = []

        async def checked() -> tuple[float | None, float | None]:
            await environment.run(checks.check_queues, QueueCheckInput())
            async with httpx.AsyncClient() as http:
                scraped.append((await http.get(f"http://127.0.0.1:{port}/metrics")).text)
            return (
                metric(scraped[-1], "sas_task_queue_backlog", queue=queue),
                metric(scraped[-1], "sas_service_backlog", service="payment", queue=payments),
            )

        await wait_until(checked, lambda seen: seen == (3.0, 2.0), timeout=60, what="backlog gauges of (3, 2)")
    text = scraped[-1]
    assert metric(text, "sas_service_backlog", service="inventory", queue=service_queue(queue, "inventory")) == 0.0
    assert metric(text, "sas_service_pollers", service="payment", queue=payments) == 0.0
