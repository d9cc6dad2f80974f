"""The designs a bench compares, and the processes that serve them (throughput.py, latency.py):

bare         BenchBareOrder: three activities, no mirror, everything on the workflow's queue
bare-queues  BenchBareQueuesOrder: the baseline with sas's task-queue layout, each activity on
             its service's own queue with a worker per queue. The gate's baseline:
             what that layout costs Temporal is not what the pattern costs
sas          OrderWorkflow on ``python worker.py``: the Agents write Processing and Processed
             themselves, local activities only for accept and failures; search-attribute
             upserts on (the dev server has them registered)
sas-nosa     the same worker code with the search-attribute upserts off
la           design (a): one local activity per transition (BenchLaOrder)
batch        design (c): transitions batched per workflow task (BenchBatchOrder)
proj         design (d): BenchBareOrder, the mirror written by a projector that tails the
             histories (bench/_projector.py)
"""

from __future__ import annotations

from typing import Any

from bench._stack import BenchStack, order_payload, wait_log

ALL = ["bare", "bare-queues", "sas", "sas-nosa", "la", "batch", "proj"]
WORKFLOW = {
    "bare": "BenchBareOrder",
    "bare-queues": "BenchBareQueuesOrder",
    "sas": "OrderWorkflow",
    "sas-nosa": "OrderWorkflow",
    "la": "BenchLaOrder",
    "batch": "BenchBatchOrder",
    "proj": "BenchBareOrder",
}
QUEUE = {
    "bare": "bench-bare",
    "bare-queues": "bench-bare-queues",
    "sas": "sas-tasks",
    "sas-nosa": "bench-sas-nosa",
    "la": "bench-la",
    "batch": "bench-batch",
    "proj": "bench-proj",
}


def start(
    stack: BenchStack, variants: list[str], search_attributes: bool = True, lean: bool = False
) -> dict[str, list]:
    """Start the dev server, the services, and every design's processes; returns, per design,
    the children whose CPU counts for it (its worker first)."""
    stack.start_temporal(search_attributes=search_attributes)
    stack.start_services(enable_faults=False)
    stack.migrate()
    procs: dict[str, list] = {}
    ready = []
    for v in variants:
        if v == "sas":
            procs[v] = [stack.sas_worker("worker-sas")]
        elif v == "sas-nosa":
            procs[v] = [
                stack.python(
                    "worker-sas-nosa", ["-m", "bench._worker", "sas-variant"], SAS_TEMPORAL__TASK_QUEUE=QUEUE[v]
                )
            ]
        else:
            args = ["-m", "bench._worker", "bench", "--task-queue", QUEUE[v]]
            args += (["--no-mirror"] if v in ("bare", "bare-queues", "proj") else []) + (["--lean"] if lean else [])
            args += ["--service-queues"] if v == "bare-queues" else []
            procs[v] = [stack.python(f"worker-{v}", args)]
        if v == "proj":
            procs[v].append(stack.python("projector", ["-m", "bench._projector", "--task-queue", QUEUE[v]]))
        ready += procs[v]
    if any(v.startswith("sas") for v in variants):
        sup = stack.supervisor()
        for v in variants:
            if v.startswith("sas"):
                procs[v].append(sup)
    for child in ready:
        wait_log(child, r"polling", 90)
    return procs


async def start_order(client: Any, variant: str, i: int, workflow_id: str) -> Any:
    """Start one order on a design; returns its handle."""
    return await client.start_workflow(WORKFLOW[variant], order_payload(i), id=workflow_id, task_queue=QUEUE[variant])


def completed(result: Any) -> bool:
    """Whether a design's workflow result says the order was processed (sas returns a dict)."""
    return (result.get("state") if isinstance(result, dict) else result) == "Processed"
