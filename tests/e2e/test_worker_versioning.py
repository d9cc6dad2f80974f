"""Safe deploys with Worker Versioning, on the dev server: the task workers of
build v1 run an order that is in flight (its charge held by the payment service); build v2, whose
OrderWorkflow is different code (it could not replay v1's history), starts beside them and is
made current with the ``temporal`` CLI, as docs/operator.md shows. New orders run on v2; the
order in flight finishes on v1, pinned to it, with no workflow task failure (no non-determinism
error); the old build's workers stay until their pinned orders are done."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import EventType, VersioningBehavior

from sas.settings import WorkerSettings
from sas.task_models import TaskResult, TaskState
from sas.workflows import ALL_WORKFLOWS
from tests.e2e.test_temporal_cli import temporal_cli
from tests.helpers import fresh_id, wait_until
from tests.stack import FAST_STEP, more_workers, start_stack


@workflow.defn(name="OrderWorkflow", sandboxed=False)
class OrderWorkflowV2:
    """Build v2's OrderWorkflow: other code, which a v1 history would not replay on."""

    @workflow.run
    async def run(self, order: Any) -> dict[str, str]:
        return {"state": "Processed", "built_by": "v2"}


async def test_an_order_in_flight_finishes_on_its_build_while_new_ones_run_on_the_next(
    client: Any, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    deployment = fresh_id("sas")
    v1 = WorkerSettings(deployment_name=deployment, build_id="v1")
    # The charge is held until v2 runs: each attempt hangs past its complete-by and is tried again,
    # for as long as a busy machine takes to start v2 (no Supervisor runs to pick up a due step).
    patient = FAST_STEP.model_copy(update={"max_attempts": 100})
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, worker=v1, default_step=patient
    ) as stack:

        async def current(build_id: str) -> None:
            # The version exists once its workers have polled: try until the server knows them all.
            await wait_until(
                lambda: temporal_cli(
                    temporal_address, "worker", "deployment", "set-current-version",
                    "--deployment-name", deployment, "--build-id", build_id, "--yes",
                ),
                lambda done: done.returncode == 0,
                timeout=60,
                interval=1,
                what=f"{build_id} made current",
            )  # fmt: skip

        await current("v1")
        in_flight = fresh_id("wv-old")
        hold = await stack.add_fault(endpoint="payment.charge", kind="hang", hang_s=60, match_order_id=in_flight)
        old = await stack.submit(in_flight)
        await wait_until(lambda: stack.step_states(in_flight), lambda s: s.get("charge") == "Processing", what="charge")

        settings = stack.settings.model_copy(
            update={"worker": WorkerSettings(deployment_name=deployment, build_id="v2")}
        )
        async with more_workers(stack, settings, "worker-v2", [OrderWorkflowV2, *_others()]):
            await current("v2")
            fresh = fresh_id("wv-new")
            new = await stack.client.start_workflow(
                "OrderWorkflow", {"sku": "x"}, id=fresh, task_queue=stack.settings.temporal.task_queue
            )
            assert await new.result() == {"state": "Processed", "built_by": "v2"}

            await stack.remove_fault(hold)
            result = await stack.client.get_workflow_handle(in_flight, result_type=TaskResult).result()
            assert result.state == TaskState.PROCESSED
            assert [e["action"] for e in await stack.ledger(in_flight)] == ["reserve", "charge", "ship"]

        info = (await old.describe()).raw_description.workflow_execution_info.versioning_info
        assert info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
        assert info.deployment_version.build_id == "v1" and info.deployment_version.deployment_name == deployment
        events = [e.event_type async for e in old.fetch_history_events()]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events  # no non-determinism error
        described = (await new.describe()).raw_description.workflow_execution_info.versioning_info
        assert described.deployment_version.build_id == "v2"


def _others() -> list[type]:
    """Every workflow of v1's workers but the OrderWorkflow, which v2 replaces."""
    from temporalio.workflow import _Definition

    return [w for w in ALL_WORKFLOWS if (d := _Definition.from_class(w)) is None or d.name != "OrderWorkflow"]
