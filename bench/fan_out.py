"""One task of N items against N one-step tasks, on one stack: wall time, CPU, and the fan-out's
history sizes.

    python bench/fan_out.py --items 1000

A dev server, the payroll service (bench/_payroll_service.py) and one sas worker run as
processes; the worker runs the ``payroll_batch`` type (a ``ForEach`` over the recipients, 50 at
once, batches of 200) and the ``one_payment`` type (one step, the same call). First one task of N
items; then N one-payment tasks, started 50 at a time (so both have 50 calls in flight). CPU is
user + system seconds of the worker, the server and the service together, from ``/proc``, over
each run. The histories: the batch task's own events and bytes, and its largest batch child's.
Then the same fan-out with refusals (``payroll_tolerant``, 2 % of its items may fail): as many
refused as it tolerates (``within_*``: the task goes on, the refused undone) and one more
(``past_*``: the task is undone, every payment refunded), with the service's ledger after each.
Then ``sas show`` of the batch task is timed, as an operator would run it (``sas_show_s``, a
Python process started and all), and its read of the state store alone (``sas_show_read_s``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cpu import cpu_s
from bench._stack import ROOT, BenchStack, print_summary, sas_client, wait_log
from sas_demo_services.launcher import free_port

_IN_FLIGHT = 50


def recipients(items: int, run: str) -> list[dict[str, Any]]:
    return [{"id": f"{run}{i}", "cents": 100 + i} for i in range(items)]


async def history_size(client: Any, workflow_id: str) -> tuple[int, int]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return len(history.events), len(json.dumps(history.to_json_dict()))


async def measure(stack: BenchStack, pids: list[int], items: int, payroll_url: str) -> dict[str, Any]:
    from temporalio.common import WorkflowIDReusePolicy

    client = await sas_client(stack.temporal_address)
    queue = "sas-tasks"
    figures: dict[str, Any] = {"items": items}

    def cpu() -> float:
        return sum(cpu_s(pid) for pid in pids)

    # Warm-up: both types once, so neither pays for the worker's first run of a workflow.
    for workflow, payload in (
        ("PayrollBatchWorkflow", {"recipients": recipients(2, "w")}),
        ("PaymentWorkflow", {"id": "w-one", "cents": 1}),
    ):
        await (await client.start_workflow(workflow, payload, id=f"warm-{workflow}", task_queue=queue)).result()

    task_id = f"fan-out-{items}"
    started, cpu0 = time.monotonic(), cpu()
    handle = await client.start_workflow(
        "PayrollBatchWorkflow", {"recipients": recipients(items, "r")}, id=task_id, task_queue=queue
    )
    result = await handle.result()
    fan_s, fan_cpu = time.monotonic() - started, cpu() - cpu0
    assert result["state"] == "Processed", result
    figures |= {"fan_out_s": round(fan_s, 2), "fan_out_cpu_s": round(fan_cpu, 2)}

    slots = asyncio.Semaphore(_IN_FLIGHT)

    async def one(i: int) -> None:
        async with slots:
            h = await client.start_workflow(
                "PaymentWorkflow",
                {"id": f"p{i}", "cents": 100 + i},
                id=f"payment-{items}-{i}",
                task_queue=queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            done = await h.result()
            assert done["state"] == "Processed", done

    started, cpu0 = time.monotonic(), cpu()
    await asyncio.gather(*(one(i) for i in range(items)))
    single_s, single_cpu = time.monotonic() - started, cpu() - cpu0
    figures |= {"single_s": round(single_s, 2), "single_cpu_s": round(single_cpu, 2)}
    figures["cpu_ratio"] = round(fan_cpu / single_cpu, 3)
    figures["time_ratio"] = round(fan_s / single_s, 3)

    events, size = await history_size(client, task_id)
    children = [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        async for e in handle.fetch_history_events()
        if e.HasField("child_workflow_execution_started_event_attributes")
    ]
    sizes = [await history_size(client, child) for child in children]
    figures |= {
        "task_history_events": events,
        "task_history_bytes": size,
        "batches": len(children),
        "largest_batch_events": max((e for e, _ in sizes), default=0),
        "largest_batch_bytes": max((b for _, b in sizes), default=0),
    }

    figures |= await refusals(client, queue, payroll_url, items)

    started = time.monotonic()
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "sas.cli.main", "show", task_id],
        env=stack.env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    figures["sas_show_s"] = round(time.monotonic() - started, 2)
    assert shown.returncode == 0 and f"{items} items" in shown.stdout, shown.stdout + shown.stderr
    figures["sas_show_read_s"] = round(await show_read_s(stack.db_url, task_id), 3)
    return figures


async def refusals(client: Any, queue: str, service_url: str, items: int) -> dict[str, Any]:
    """The same many-at-once fan-out with refusals (``payroll_tolerant``: 2 % may fail), once
    with as many refused as it tolerates and once with one more: the task's state and counts,
    and what the service's ledger holds after each (paid, refunded, the most any one was paid)."""
    import httpx

    allowed = int(items * 2 / 100)
    figures: dict[str, Any] = {"tolerated": allowed}
    for case, refused in (("within", allowed), ("past", allowed + 1)):
        spread = items // max(refused, 1)
        people = [
            {
                "id": f"refuse-{case}{i}" if refused and i % spread == 0 and i // spread < refused else f"{case}{i}",
                "cents": 1,
            }
            for i in range(items)
        ]
        handle = await client.start_workflow(
            "PayrollTolerantWorkflow", {"recipients": people}, id=f"fan-out-{case}-{items}", task_queue=queue
        )
        result = await handle.result()
        pay = result["steps"][0]
        async with httpx.AsyncClient(base_url=service_url) as http:
            held = (await http.get("/payroll/ledger", params={"prefix": case})).json()
        counts = pay.get("result") or {}
        figures |= {
            f"{case}_refused": refused,
            f"{case}_state": result["state"],
            f"{case}_processed": counts.get("processed", 0),
            f"{case}_compensated": counts.get("compensated", 0),
            f"{case}_paid": held["paid"],
            f"{case}_refunded": held["refunded"],
            f"{case}_most_paid_once": held["most_paid_once"],
        }
    return figures


async def show_read_s(db_url: str, task_id: str) -> float:
    """What ``sas show`` does apart from starting Python: its read of the task from the state
    store, timed in this process (the best of three)."""
    from sas.cli.show_cmd import task_history
    from sas.settings import DatabaseSettings
    from sas.state_store.engine import create_engine, session_factory

    engine = create_engine(DatabaseSettings(url=db_url))
    sessions = session_factory(engine, read_only=True)
    took = []
    try:
        for _ in range(3):
            started = time.monotonic()
            async with sessions() as session:
                data = await task_history(session, task_id)
            took.append(time.monotonic() - started)
            assert data is not None
    finally:
        await engine.dispose()
    return min(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    args = parser.parse_args()
    with BenchStack() as stack:
        temporal = stack.start_temporal()
        stack.migrate()
        port = free_port()
        service = stack.python("payroll", ["-m", "bench._payroll_service", "--port", str(port)])
        wait_log_ready(port)
        worker = stack.sas_worker(
            "worker",
            SAS_TASK_TYPES__MODULES="bench._payroll",
            SAS_TASK_TYPES__RUN="payroll_batch,payroll_tolerant,one_payment",
            SAS_SERVICES__PAYROLL__URL=f"http://127.0.0.1:{port}",
        )
        wait_log(worker, r"polling", 90)
        pids = [child.process.pid for child in (temporal, service, worker)]
        figures = asyncio.run(measure(stack, pids, args.items, f"http://127.0.0.1:{port}"))
    print_summary(figures)


def wait_log_ready(port: int) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/payroll/lookup", params={"idempotency_key": "x"}, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("the payroll service did not answer")


if __name__ == "__main__":
    main()
