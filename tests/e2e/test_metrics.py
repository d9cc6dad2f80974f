"""The worker's Prometheus endpoint: the SDK's series and the Agents' own, after a known run."""

from __future__ import annotations

import re

import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from sas import state_store
from sas.activities import build_activities
from sas.remote_services.launcher import free_port
from sas.runtime.connect import metrics_runtime
from sas.state_store.agent_writes import make_step_writer
from sas.workflows import ALL_WORKFLOWS
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
        worker = Worker(
            client,
            task_queue=queue,
            workflows=ALL_WORKFLOWS,
            activities=build_activities(
                settings, http, state_store.session_factory(engine), "metrics-worker", step_writer=writer
            ),
        )
        async with worker:
            handle = await client.start_workflow("OrderWorkflow", order(), id=task_id, task_queue=queue)
            await handle.result()

            async def scrape() -> str:
                return (await http.get(f"http://127.0.0.1:{port}/metrics")).text

            text = await wait_until(scrape, lambda t: "sas_agent_call_errors" in t, what="agent metrics exported")
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
            v for labels, v in latency_counts.items() if f'action="{a}"' in labels and f'task_queue="{queue}"' in labels
        )
        for a in ("reserve", "charge", "ship")
    }
    assert by_action == {"reserve": 1.0, "charge": 2.0, "ship": 1.0}
    # Temporal's own series come through the same endpoint.
    assert "temporal_workflow_completed" in text and "temporal_activity_execution_failed" in text
