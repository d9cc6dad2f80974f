"""Design (d): the mirror written from Temporal's own history by a projector.

The workflow (``BenchBareOrder``) writes nothing. This process finds the workflows of
a task queue through visibility, tails each one's history (long-poll
``GetWorkflowExecutionHistory``, wait_new_event) and writes the task and step rows
with sas's hot-path writer (``sas.state_store.agent_writes``): WorkflowExecutionStarted -> accept,
ActivityTaskScheduled -> Processing, ActivityTaskCompleted -> Processed,
WorkflowExecutionCompleted -> task Processed. Versions are history event ids, so the
writes are ordered and idempotent.

``python -m bench._projector --task-queue Q``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.api.enums.v1 import EventType

STEP_OF = {"bench.reserve": "reserve", "bench.charge": "charge", "bench.ship": "ship"}


async def project(task_queue: str) -> None:
    from bench._activities import accept, transition
    from sas.runtime.connect import connect
    from sas.runtime.entry import serve_until_signalled  # noqa: F401
    from sas.settings import get_settings
    from sas.state_store.agent_writes import make_step_writer

    settings = get_settings()
    writer = make_step_writer(settings.database)
    client = await connect(settings.temporal, "projector")
    seen: set[str] = set()
    tails: set[asyncio.Task[None]] = set()

    async def write(ts: list[dict]) -> None:
        for t in ts:
            await writer.write(transition(t, "projector"))

    async def tail(workflow_id: str, run_id: str) -> None:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        scheduled: dict[int, str] = {}
        async for event in handle.fetch_history_events(wait_new_event=True):
            at = event.event_time.ToDatetime().replace(tzinfo=UTC).isoformat()
            base = {"task_id": workflow_id, "seq": event.event_id, "at": at}
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                await accept(writer, workflow_id, {}, datetime.fromisoformat(at), "BenchBareOrder", task_queue)
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                step = STEP_OF[event.activity_task_scheduled_event_attributes.activity_type.name]
                scheduled[event.event_id] = step
                await write([{**base, "step": step, "state": "Processing", "task_state": "Processing"}])
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                step = scheduled[event.activity_task_completed_event_attributes.scheduled_event_id]
                await write([{**base, "step": step, "state": "Processed"}])
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                await write([{**base, "step": "ship", "state": "Processed", "task_state": "Processed"}])

    async def tail_logged(workflow_id: str, run_id: str) -> None:
        try:
            await tail(workflow_id, run_id)
        except Exception as err:  # noqa: BLE001
            print(f"projector: {workflow_id}: {err!r}", file=sys.stderr, flush=True)
            seen.discard(workflow_id)

    print(f"projector polling {task_queue}", file=sys.stderr, flush=True)
    since = datetime.now(UTC) - timedelta(minutes=1)
    try:
        while True:
            polled_at = datetime.now(UTC)
            query = f"TaskQueue = '{task_queue}' AND StartTime >= '{since.isoformat().replace('+00:00', 'Z')}'"
            async for wf in client.list_workflows(query, page_size=1000):
                if wf.id not in seen:
                    seen.add(wf.id)
                    t = asyncio.create_task(tail_logged(wf.id, wf.run_id))
                    tails.add(t)
                    t.add_done_callback(tails.discard)
            since = polled_at - timedelta(seconds=10)  # visibility lags a little behind
            await asyncio.sleep(0.2)
    finally:
        await writer.aclose()


def main() -> None:
    from sas.runtime.entry import run_entry

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task-queue", required=True)
    args = parser.parse_args()
    run_entry(lambda: project(args.task_queue))


if __name__ == "__main__":
    main()
