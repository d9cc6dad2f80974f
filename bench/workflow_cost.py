"""CPU per workflow run on the worker's workflow side, measured by replay (no server, no load).

    python bench/workflow_cost.py --runs 400

Records one history of each design on a throw-away stack (dev server, services, the bare
baseline worker and sas's worker), then replays each history ``--runs`` times in this process
and reports process CPU per run: the sandbox's creation (the workflow module re-imported), every
activation, and the payload visits of the data converter - what a worker spends on a workflow
apart from its activities. The copies are parsed before the clock starts (a live worker gets
its events from the SDK's core, not from JSON). Each history is replayed under Temporal's stock sandbox
runner and under the runner sas's workers use (workflows/runner.py), with the interceptors sas's
workers run its workflows with. Process CPU time is little affected by other load on the machine,
unlike the throughput bench's rates.

``<design>_<runner>_activation_ms`` is the part of a run spent in its activations, on the threads
that run them: the workflow's own code (sas's Scheduler, or bare's three calls), the SDK's
and the sandbox's entry for each, without the sandbox's creation. Measured around the SDK's
``_RunningWorkflow.activate`` (private), so left out when an SDK release renames it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import BenchStack, order_payload, print_summary, sas_client, wait_log


async def record(stack: BenchStack) -> dict[str, Any]:
    """One completed history per design: bare (BenchBareOrder) and sas (OrderWorkflow)."""
    stack.start_temporal()
    stack.start_services(enable_faults=False)
    stack.migrate()
    bare = stack.python("worker-bare", ["-m", "bench._worker", "bench", "--task-queue", "bench-bare", "--no-mirror"])
    sas = stack.sas_worker("worker-sas")
    for child in (bare, sas):
        wait_log(child, r"polling", 90)
    client = await sas_client(stack.temporal_address)
    histories = {}
    for design, workflow, queue in (("bare", "BenchBareOrder", "bench-bare"), ("sas", "OrderWorkflow", "sas-tasks")):
        handle = await client.start_workflow(workflow, order_payload(1), id=f"cost-{design}", task_queue=queue)
        await handle.result()
        histories[design] = await handle.fetch_history()
    return histories


class ActivationClock:
    """Thread CPU spent inside workflow activations, summed over every thread that runs them."""

    def __init__(self) -> None:
        import threading

        from temporalio.worker import _workflow

        self.seconds = 0.0
        self._lock = threading.Lock()
        running: Any = getattr(_workflow, "_RunningWorkflow", None)
        self.available = callable(getattr(running, "activate", None))
        if not self.available:
            return
        activate = running.activate
        clock = self

        def timed(workflow: Any, act: Any) -> Any:
            started = time.thread_time()
            try:
                return activate(workflow, act)
            finally:
                spent = time.thread_time() - started
                with clock._lock:
                    clock.seconds += spent

        running.activate = timed


async def replay_cpu_ms(history: Any, runs: int, runner: Any, clock: ActivationClock) -> tuple[float, float]:
    """Median over three batches of CPU ms per replayed run, history parsing excluded, and of
    the activations' share of it."""
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from bench._workflows import BENCH_WORKFLOWS
    from sas.payload_codec import data_converter
    from sas.workflows import ALL_WORKFLOWS
    from sas.workflows.shell.interceptors import workflow_interceptors

    replayer = Replayer(
        workflows=[*ALL_WORKFLOWS, *BENCH_WORKFLOWS],
        data_converter=data_converter(None),
        workflow_runner=runner,
        interceptors=workflow_interceptors(),
    )
    as_json = history.to_json_dict()

    async def batch(n: int) -> tuple[float, float]:
        # Each run its own workflow id, as in a worker; parsed before the clock starts.
        copies = [WorkflowHistory.from_json(f"{history.workflow_id}-{i}", as_json) for i in range(n)]

        async def each() -> Any:
            for copy in copies:
                yield copy

        started, in_activations = time.process_time(), clock.seconds
        async with replayer.workflow_replay_iterator(each()) as results:
            async for result in results:
                if result.replay_failure is not None:
                    raise result.replay_failure
        return (time.process_time() - started) * 1000 / n, (clock.seconds - in_activations) * 1000 / n

    await batch(20)  # warm: imports, caches
    batches = [await batch(runs) for _ in range(3)]
    return statistics.median(b[0] for b in batches), statistics.median(b[1] for b in batches)


async def bench(args: argparse.Namespace) -> dict[str, object]:
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from sas.workflows.runner import workflow_runner

    with BenchStack(keep=args.keep) as stack:
        histories = await record(stack)
        stack.group.stop_all()  # only this process runs while replaying
    sas_runner = workflow_runner()
    runners = {"stock": SandboxedWorkflowRunner(restrictions=sas_runner.restrictions), "sas": sas_runner}
    out: dict[str, object] = {"runs": args.runs}
    clock = ActivationClock()
    for design, history in histories.items():
        for name, runner in runners.items():
            ms, activations_ms = await replay_cpu_ms(history, args.runs, runner, clock)
            out[f"{design}_{name}_runner_ms"] = round(ms, 2)
            if clock.available:
                out[f"{design}_{name}_runner_activation_ms"] = round(activations_ms, 3)
            print(
                f"{design} history ({len(history.events)} events), {name} runner: {ms:.2f} ms CPU per run,"
                f" {activations_ms:.3f} in its activations",
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400, help="replays per batch; three batches (default 400)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    print_summary(asyncio.run(bench(parser.parse_args())))


if __name__ == "__main__":
    main()
