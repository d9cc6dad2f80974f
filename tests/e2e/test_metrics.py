"""The worker's Prometheus endpoint: the SDK's series and the Agents' own, after a known run."""

from __future__ import annotations

import re

import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from sas import state_store
from sas.activities import build_activities, service_breakers
from sas.runtime.connect import metrics_runtime
from sas.runtime.task_workers import build_task_workers
from sas.state_store.agent_writes import make_step_writer
from sas.workflows import ALL_WORKFLOWS
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


def samples(text: str, name: str) -> dict[str, float]:
    """{label-string: value} of one metric in Prometheus text format."""
    found = {}
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+([0-9.eE+-]+)$", line)
        if match:
            found[match[1] or ""] = float(match[2])
    return found


async def test_worker_metrics_after_a_known_run(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    port = free_port()
    client = await Client.connect(
        stack.settings.temporal.address,
        data_converter=pydantic_data_converter,
        runtime=metrics_runtime(f"127.0.0.1:{port}"),
    )
    queue = fresh_id("metrics-q")
    settings = stack.settings.model_copy(
        update={"temporal": stack.settings.temporal.model_copy(update={"task_queue": queue})}
    )
    engine = state_store.create_engine(settings.database)
    task_id = fresh_id("metrics")
    await stack.add_fault(endpoint="payment.charge", kind="transient", times=1, match_order_id=task_id)
    writer = make_step_writer(settings.database)
    async with httpx.AsyncClient() as http:
        worker = build_task_workers(
            client,
            settings,
            build_activities(settings, http, state_store.session_factory(engine), "metrics-worker", step_writer=writer),
            workflows=ALL_WORKFLOWS,
            identity="metrics-worker",
            breakers=service_breakers(settings.services, "metrics-worker", None),
        )
        async with worker:
            handle = await client.start_workflow("OrderWorkflow", order(), id=task_id, task_queue=queue)
            await handle.result()

            async def scrape() -> str:
                return (await http.get(f"http://127.0.0.1:{port}/metrics")).text

            # Temporal's own series reach the endpoint on the SDK core's own schedule, after ours.
            expected = ("sas_agent_call_errors", "temporal_workflow_completed", "temporal_activity_execution_failed")
            text = await wait_until(scrape, lambda t: all(k in t for k in expected), what="the metrics exported")
    await writer.aclose()
    await engine.dispose()

    errors = samples(text, "sas_agent_call_errors")
    charge_errors = [
        v for labels, v in errors.items() if 'service="payment"' in labels and 'error_type="RemoteTransient"' in labels
    ]
    assert charge_errors == [1.0]
    latency_counts = samples(text, "sas_agent_call_latency_count")
    by_action = {
        a: sum(
            v
            for labels, v in latency_counts.items()
            if f'action="{a}"' in labels
            and f'task_queue="{queue}"' in labels  # no service asks for its own queue: the workflow's
        )
        for a in ("reserve", "charge", "ship")
    }
    assert by_action == {"reserve": 1.0, "charge": 2.0, "ship": 1.0}
    # Temporal's own series come through the same endpoint.
    assert "temporal_workflow_completed" in text and "temporal_activity_execution_failed" in text


async def test_the_worker_exports_each_services_breaker(sqlite_url: str) -> None:
    from datetime import UTC, datetime

    from sas.breaker.rows import force
    from sas.settings import BreakerSettings, DatabaseSettings, ServicesSettings

    port = free_port()
    runtime = metrics_runtime(f"127.0.0.1:{port}")
    assert runtime is not None
    await state_store.upgrade_async(sqlite_url)
    engine = state_store.create_engine(DatabaseSettings(url=sqlite_url))
    sessions = state_store.session_factory(engine)
    services = ServicesSettings(payment={"breaker": BreakerSettings(enabled=True, sync_s=0.1)})
    try:
        async with httpx.AsyncClient() as http, service_breakers(services, "w", sessions, runtime.metric_meter) as b:

            async def payment(name: str) -> list[float]:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
                return [v for k, v in samples(text, name).items() if 'service="payment"' in k]

            await wait_until(lambda: payment("sas_breaker_state"), lambda v: v == [0.0], what="closed exported")
            async with sessions() as session:
                await force(session, "payment", "open", "test", "metrics", datetime.now(UTC))
            await wait_until(lambda: payment("sas_breaker_state"), lambda v: v == [2.0], what="open exported")
            assert not b["payment"].admit()  # held: the call is refused, and counted
            await wait_until(lambda: payment("sas_breaker_rejected"), lambda v: v == [1.0], what="refusal exported")
    finally:
        await engine.dispose()
