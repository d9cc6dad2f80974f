"""A service back from an outage: what it sees in its first seconds, with today's release of its
held work, or with the staged one.

    python bench/release.py --rate 10 --normal-s 10 --outage-s 30

One in-process stack (a Temporal dev server, one worker of the tests' stack over SQLite, no
Supervisor) runs a one-step task type (``tests/e2e/metered.py``) against a loopback service that
notes when each request arrives; its breaker is on. --rate tasks a second are submitted for
--normal-s seconds (the service's steady rate), then its breaker is forced open, as
``sas services open`` does, while the load goes on for --outage-s seconds (the backlog, held in
its queue), then forced closed and the load stops. The staged release is told the service's
normal rate (``RELEASE__UP_TO_PER_SECOND=--rate``); code without it (a worktree of the commit
before, on PYTHONPATH) releases everything at once: the baseline. One line:

    release=staged|all_at_once steady_per_s=… backlog=… peak_per_s_first_10s=… peak_over_steady=…
    drain_s=… completed=… compensated=…

``peak_per_s_first_10s``: the most requests in any window [t, t + 1 s) starting in the first 10 s
after the close; ``drain_s``: from the close until the last task completed. The goal
(docs/benchmarks.md): peak_over_steady <= 1.5. The script asserts nothing.

    python bench/release.py --case incident|cooldown [--bypass]

The same outage let go by someone else, with a Supervisor running (``sas/breaker/backlog.py``):
for --outage-s the service answers 503, and the backlog (--rate x --outage-s tasks) fails there.
``incident``: the load goes on meanwhile; each task is parked at once (the ladder's outcome, no
retries), they are one incident, and once the service is back the operator retries it
(``TaskClient.bulk("retry", Selection(incident=ID))``). ``cooldown``: the backlog is submitted at
once as the outage begins, fails together, and its one cool-down try (--outage-s long) ends
together, about when the service is back. The peak is counted from the moment the service is
back. ``--bypass`` turns the release off (``RELEASE__ENABLED=false``): these cases as the code
before them let them go, the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sas.breaker.rows import force
from sas.runtime.local_stack import temporal_binary
from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.task_models import StepPolicyValues, TaskState
from sas.task_models.search_attributes import dev_server_flags
from sas.workflows import registry
from tests.helpers import fresh_id, serving
from tests.stack import Stack, start_stack

# The backlog drains at the service's normal rate: no attempt may end waiting its turn.
PATIENT = StepPolicyValues(
    complete_by_s=600.0, heartbeat_s=10.0, max_attempts=10, initial_interval_s=0.2, backoff=1.5, max_interval_s=1.0
)


def most_in_a_second(times: list[float], start: float, end: float) -> int:
    """The most requests in a window [t, t + 1 s) with t in [start, end)."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + 1.0) - i for i, t in enumerate(ordered) if start <= t < end), default=0)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import os

    os.environ["SAS_TASK_TYPES__MODULES"] = "tests.e2e.metered"
    get_settings.cache_clear()
    registry.refresh()
    arrivals: list[float] = []

    down = [False]

    async def ping(request: Request) -> Response:
        arrivals.append(time.time())
        if down[0]:
            return JSONResponse({"error": "down", "message": "down"}, status_code=503)
        return JSONResponse({"ok": True})

    staged = "release" in ServiceSettings.model_fields and not args.bypass
    meter: dict[str, Any] = {"breaker": {"enabled": True, "min_calls": 100_000, "open_s": 3_600}}
    if "release" in ServiceSettings.model_fields:
        meter["release"] = {"up_to_per_second": args.rate, "enabled": staged}
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=dev_server_flags(),
    )
    folder = tempfile.mkdtemp(prefix="sas-bench-release-")
    try:
        async with serving(Starlette(routes=[Route("/meter/ping", ping, methods=["POST"])]), "meter") as url:
            meter["url"] = url
            where = ServicesSettings(url=url, meter=meter)  # type: ignore[call-arg]
            supervised = args.case != "breaker"
            ladder = {"cooldown_tries": 1, "cooldown_s": args.outage_s} if args.case == "cooldown" else {}
            async with start_stack(
                env.client,
                env.client.service_client.config.target_host,
                url,
                f"sqlite+aiosqlite:///{folder}/state.db",
                supervisor=supervised,
                supervisor_settings=_ladder(args, **ladder) if supervised else None,
                services=where,
                steps={"ping": ONE_TRY if supervised else PATIENT},
            ) as stack:
                if args.case == "breaker":
                    return await outage(stack, args, staged, arrivals)
                return await let_go(stack, args, staged, arrivals, down)
    finally:
        await env.shutdown()


async def outage(stack: Stack, args: argparse.Namespace, staged: bool, arrivals: list[float]) -> dict[str, Any]:
    handles: list[Any] = []

    async def load(seconds: float) -> None:
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < seconds:
            handles.append(await stack.submit(fresh_id("bench-rel"), {"n": n}, "MeteredWorkflow"))
            n += 1
            await asyncio.sleep(max(started + n / args.rate - time.monotonic(), 0))

    async def forced(state: Any) -> None:
        async with stack.sessions() as session:
            await force(session, "meter", state, "bench", "outage", datetime.now(UTC))

    normal_from = time.time()
    await load(args.normal_s)
    await asyncio.gather(*(h.result() for h in handles))
    steady = len([t for t in arrivals if normal_from + 1 <= t < normal_from + args.normal_s]) / (args.normal_s - 1)
    before = len(handles)
    await forced("open")
    await asyncio.sleep(1.0)  # the worker reads the row every sync_s (1 s)
    await load(args.outage_s)
    backlog = len(handles) - before
    closed_at = time.time()
    await forced("closed")
    results = await asyncio.gather(*(h.result() for h in handles))
    drained_at = time.time()
    peak = most_in_a_second(arrivals, closed_at, closed_at + 10.0)
    return {
        "release": "staged" if staged else "all_at_once",
        "steady_per_s": round(steady, 1),
        "backlog": backlog,
        "peak_per_s_first_10s": peak,
        "peak_over_steady": round(peak / steady, 2) if steady else None,
        "drain_s": round(drained_at - closed_at, 1),
        "completed": sum(1 for r in results if r.state == TaskState.PROCESSED),
        "compensated": sum(1 for r in results if r.state != TaskState.PROCESSED),
    }


# One attempt: a call that fails is the Supervisor's at once, and waits its turn long enough.
ONE_TRY = PATIENT.model_copy(update={"max_attempts": 1})


def _ladder(args: argparse.Namespace, **ladder: Any) -> Any:
    from sas.settings import SupervisorSettings

    given: dict[str, Any] = {"retries": 0, "cooldown_tries": 0, "outcome": "park"} | ladder
    return SupervisorSettings(
        interval_s=0.5,
        batch_size=1_000,
        concurrency=64,
        orphan_after_s=3_600,
        orphan_check_s=3_600,
        workflow_id=fresh_id("bench-supervisor"),
        **given,
    )


async def let_go(
    stack: Stack, args: argparse.Namespace, staged: bool, arrivals: list[float], down: list[bool]
) -> dict[str, Any]:
    """The outage's backlog let go by an incident's retry, or by cool-downs ending together."""
    from sas.api.client import Selection, TaskClient
    from sas.state_store.incidents import list_incidents

    handles: list[Any] = []

    async def load(seconds: float) -> None:
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < seconds:
            handles.append(await stack.submit(fresh_id("bench-rel"), {"n": n}, "MeteredWorkflow"))
            n += 1
            await asyncio.sleep(max(started + n / args.rate - time.monotonic(), 0))

    normal_from = time.time()
    await load(args.normal_s)
    await asyncio.gather(*(h.result() for h in handles))
    steady = len([t for t in arrivals if normal_from + 1 <= t < normal_from + args.normal_s]) / (args.normal_s - 1)
    before = len(handles)
    down[0] = True
    outage_from = time.monotonic()
    if args.case == "cooldown":
        count = int(args.rate * args.outage_s)
        handles += await asyncio.gather(
            *(stack.submit(fresh_id("bench-rel"), {"n": n}, "MeteredWorkflow") for n in range(count))
        )
    else:
        await load(args.outage_s)
    backlog = len(handles) - before
    await asyncio.sleep(max(outage_from + args.outage_s - time.monotonic(), 0))
    tasks = TaskClient(stack.client, stack.settings, actor="bench")
    incident = None
    if args.case == "incident":
        while incident is None:
            async with stack.sessions() as session:
                found = await list_incidents(session, "open", 10)
            if found and found[0][1].parked >= backlog:
                incident = found[0][0].id
            else:
                await asyncio.sleep(0.5)
    down[0] = False
    back_at = time.time()
    if incident is not None:
        await tasks.bulk("retry", Selection(limit=1_000, incident=incident), reason="the service is back")
    results = await asyncio.gather(*(h.result() for h in handles))
    drained_at = time.time()
    peak = most_in_a_second(arrivals, back_at, back_at + 10.0)
    return {
        "case": args.case,
        "release": "staged" if staged else "all_at_once",
        "steady_per_s": round(steady, 1),
        "backlog": backlog,
        "peak_per_s_first_10s": peak,
        "peak_over_steady": round(peak / steady, 2) if steady else None,
        "drain_s": round(drained_at - back_at, 1),
        "completed": sum(1 for r in results if r.state == TaskState.PROCESSED),
        "compensated": sum(1 for r in results if r.state != TaskState.PROCESSED),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=10.0, help="Tasks a second: the service's steady rate.")
    parser.add_argument("--normal-s", type=float, default=10.0, help="Seconds of load before the outage.")
    parser.add_argument("--outage-s", type=float, default=30.0, help="Seconds the breaker holds the work.")
    parser.add_argument(
        "--case",
        choices=("breaker", "incident", "cooldown"),
        default="breaker",
        help="Who lets the backlog go: the breaker closing, an incident's retry, cool-downs ending together.",
    )
    parser.add_argument("--bypass", action="store_true", help="The release off (RELEASE__ENABLED=false): the baseline.")
    figures = asyncio.run(run(parser.parse_args()))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
