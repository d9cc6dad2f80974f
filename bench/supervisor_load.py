"""The Supervisor under load: with --tasks orders failing on one service (and --open more open and
healthy), how long an unrelated permanent failure waits for its decision, in Supervisor intervals.

    python bench/supervisor_load.py                         # 1,000 tasks; SQLite and PostgreSQL
    python bench/supervisor_load.py --backends sqlite --concurrency 1,16
    python bench/supervisor_load.py --poison                # with one poisoned task in front of it
    python bench/supervisor_load.py --tasks 5000 --open 5000 --settle-timeout-s 3600   # 10,000 open
    python bench/supervisor_load.py --seeded-open 99000      # 100,000 open: 1,000 real, 99,000 seeded

Each run is a fresh stack: the Temporal dev server, the remote services with fault injection, one
``worker.py`` and ``python -m sas.supervisor``, with the default settings but these: the steps'
quick retries off (``SAS_DEFAULT_STEP__MAX_ATTEMPTS=1``, so every failure reaches the Supervisor
at once), a ladder whose cool-down tries never run out (``COOLDOWN_TRIES=1000``, every
``--cooldown-s``: the failing orders come due again and again, in waves), and the Supervisor's
``SAS_SUPERVISOR__CONCURRENCY`` set per run, and the ship step's complete-by a day
(``SAS_STEPS__SHIP__COMPLETE_BY_S=86400``). Every ``payment.charge`` of the failing orders answers
503 and every ``shipping.ship`` of the open ones hangs: fault rules matching the orders' id prefix
(``load-<run>-fail-`` and ``load-<run>-open-``), so neither fault touches the other group.

The load: --tasks orders, all failing at charge, and --open orders (default 0) stalled at ship: open
and healthy, Processing tasks the Supervisor's scan reads beside the failing ones. Once most of them are in their cool-downs, a
probe order is submitted every --probe-every-s seconds, --probes of them; each one's reserve is
refused for good (a permanent fault matching that order alone). Its wait is the time from the
reserve's failure (the ActivityTaskFailed event in its history) to the Supervisor's decision
(``decisions.decided_at``); ``probe_taken_in_max_s`` is the longest part of it spent before a
worker started the workflow task that took the failure in, ``probe_recorded_max_s`` the longest
before the workflow had recorded it in the state store (each probe's parts go to stderr). Also counted: decisions per second
over the probes' window. One line per run, and a summary line:

    backend=sqlite concurrency=16 tasks=1000 open=0 interval_s=5 probe_wait_median_s=… probe_wait_max_s=…
    probe_wait_max_intervals=… probe_taken_in_max_s=… probe_recorded_max_s=… decisions_per_s=… open_at_end=…
    supervisor_wakes=… supervisor_events=…

``supervisor_wakes`` counts the wake signals the Supervisor's workflow received over the run (every
run of it), ``supervisor_events`` the events its histories hold.

``open_at_end`` counts the open orders still Processing at ship once every probe is decided; the
run stops if it is under 90% of --open (the load it claims would not have been there). The goal:
probe_wait_max_intervals <= 2. Measured, not asserted.

--seeded-open N writes N more healthy open orders straight into the migrated state store before
any process starts (bench/_seed.py: reserve and charge Processed, ship Processing with its
complete-by a day out), so that the Supervisor's scans read a table of 100,000 open tasks without
the hours 100,000 real orders would take to start. They have no workflow in Temporal, so the
orphan check, which asks Temporal about open tasks untouched for ``orphan_after_s``, would call
them gone: with seeded rows ``SAS_SUPERVISOR__ORPHAN_AFTER_S`` is set past the run (the check's
cost is bounded per round by ``orphan_batch`` whatever the count). The run stops if a seeded row
was changed or decided on, or is due by the Supervisor's own scan (``seeded_touched``).

Also reported, for every run: the Supervisor's peak memory (``supervisor_peak_rss_mb``, VmHWM of
its process at the end) and its sweeps' times, read from the Supervisor workflow's histories
(each activity's start to its completion): ``scan_ms_median``/``scan_ms_max`` (``supervisor.scan``,
the due steps' read and the decisions), ``apply_ms_median``/``apply_ms_max`` (``supervisor.apply``),
``orphans_ms_max`` (``supervisor.check_orphans``). Its Prometheus endpoint is on
(``SAS_METRICS__SUPERVISOR_BIND``), so the store-wide gauges' counts are part of the load, as in
production.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._seed import load, open_rows
from bench._stack import BenchStack, free_port, median, order_payload, poll, print_summary, sas_client, wait_log
from bench.sweep import create_pg_database, drop_pg_database

SEEDED_PREFIX = "seeded-open-"


async def in_cooldown(sessions: Any) -> int:
    """Charge steps past the ladder's quick retries (FailureCount 2): in their cool-downs."""
    from sqlalchemy import func, select

    from sas.state_store.mirror_tables import Step

    async with sessions() as session:
        found = await session.scalar(
            select(func.count()).select_from(Step).where(Step.name == "charge", Step.failure_count >= 2)
        )
        return int(found or 0)


async def open_at_ship(sessions: Any, prefix: str) -> int:
    """The open orders still in flight at ship: Processing, neither done nor failed."""
    from sqlalchemy import func, select

    from sas.state_store.mirror_tables import Task

    async with sessions() as session:
        found = await session.scalar(
            select(func.count())
            .select_from(Task)
            .where(Task.task_id.startswith(prefix), Task.state == "Processing", Task.current_step == "ship")
        )
        return int(found or 0)


async def decided_at(sessions: Any, task_id: str) -> datetime | None:
    from sqlalchemy import select

    from sas.state_store.tables import Decision

    async with sessions() as session:
        return await session.scalar(
            select(Decision.decided_at).where(Decision.task_id == task_id, Decision.kind != "wait").limit(1)
        )


async def decision_of(sessions: Any, task_id: str, timeout: float) -> datetime:
    async def probe() -> datetime | None:
        return await decided_at(sessions, task_id)

    found = await poll(probe, bool, timeout, 0.5, f"{task_id} decided")
    assert found is not None
    return found


async def decisions_between(sessions: Any, start: datetime, end: datetime) -> int:
    from sqlalchemy import func, select

    from sas.state_store.tables import Decision

    async with sessions() as session:
        found = await session.scalar(
            select(func.count()).select_from(Decision).where(Decision.decided_at >= start, Decision.decided_at < end)
        )
        return int(found or 0)


async def failed_at(client: Any, task_id: str) -> tuple[datetime, datetime | None, datetime | None]:
    """When the probe's reserve failed, by its workflow's history (refused, or, on a loaded
    machine, before its call got an answer, timed out at its complete-by); when a worker started
    the workflow task that took the failure in; and when that workflow had recorded it in the
    state store (the first marker after the failure: its local activity's write). None: not yet."""
    failed: datetime | None = None
    started: datetime | None = None
    async for event in client.get_workflow_handle(task_id).fetch_history_events():
        at = event.event_time.ToDatetime().astimezone()
        if failed is None and (
            event.HasField("activity_task_failed_event_attributes")
            or event.HasField("activity_task_timed_out_event_attributes")
        ):
            failed = at
        elif failed is not None and started is None and event.HasField("workflow_task_started_event_attributes"):
            started = at
        elif failed is not None and started is not None and event.HasField("marker_recorded_event_attributes"):
            return failed, started, at
    if failed is None:
        raise RuntimeError(f"{task_id}: no failed or timed-out activity in its history")
    return failed, started, None


async def seeded_touched(sessions: Any) -> int:
    """Seeded rows the run changed (a task or step no longer as written) or decided on, or that
    the Supervisor's scan would take as due now (they would crowd its batches: not healthy)."""
    from datetime import UTC, timedelta

    from sqlalchemy import func, or_, select

    from sas.settings import SupervisorSettings
    from sas.state_store.mirror_tables import Step, Task
    from sas.state_store.queries import due_steps
    from sas.state_store.tables import Decision

    async with sessions() as session:
        grace = timedelta(seconds=SupervisorSettings().overdue_grace_s)
        due = await due_steps(session, datetime.now(UTC), grace, 1000)
        due_seeded = sum(step.task_id.startswith(SEEDED_PREFIX) for step, _ in due)
        tasks = await session.scalar(
            select(func.count())
            .select_from(Task)
            .where(Task.task_id.startswith(SEEDED_PREFIX), or_(Task.state != "Processing", Task.version != 0))
        )
        steps = await session.scalar(
            select(func.count())
            .select_from(Step)
            .where(Step.task_id.startswith(SEEDED_PREFIX), or_(Step.version != 30000, Step.failure_count != 0))
        )
        decided = await session.scalar(
            select(func.count()).select_from(Decision).where(Decision.task_id.startswith(SEEDED_PREFIX))
        )
        return int(tasks or 0) + int(steps or 0) + int(decided or 0) + due_seeded


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident memory (VmHWM), in MB; None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def add_poison(sessions: Any, task_id: str) -> None:
    """A decision in the outbox that no request can carry (FailureCount above its bound): one
    task's poison, which once stopped every sweep (the Supervisor retried sending it for ever)."""
    from datetime import UTC

    from sas.state_store import tables
    from sas.task_models.status import MAX_FAILURE_COUNT

    async with sessions() as session, session.begin():
        session.add(
            tables.Decision(
                task_id=task_id,
                step="charge",
                failure_count=MAX_FAILURE_COUNT + 1,
                kind="retry",
                observed_state="Failed",
                reason="the bench's poison: a FailureCount no request may carry",
                decided_by="bench",
                decided_at=datetime.now(UTC),
                signal_sent_at=None,
            )
        )


async def run(args: argparse.Namespace, backend: str, concurrency: int) -> dict[str, Any]:
    from sas import state_store
    from sas.settings import DatabaseSettings, Settings

    queue = Settings().temporal.task_queue
    pg_name = None
    with BenchStack(keep=args.keep) as stack:
        if backend == "postgres":
            pg_name, stack.db_url = await create_pg_database(args.pg_admin_url)
        env = {
            "SAS_DEFAULT_STEP__MAX_ATTEMPTS": "1",
            "SAS_SUPERVISOR__COOLDOWN_S": str(args.cooldown_s),
            "SAS_SUPERVISOR__COOLDOWN_TRIES": "1000",
            "SAS_SUPERVISOR__INTERVAL_S": str(args.interval_s),
            "SAS_SUPERVISOR__CONCURRENCY": str(concurrency),
            # The open orders' ship hangs at the service; its complete-by must outlast the run.
            "SAS_STEPS__SHIP__COMPLETE_BY_S": "86400",
            "SAS_METRICS__SUPERVISOR_BIND": f"127.0.0.1:{free_port()}",
        }
        if args.seeded_open:
            # Seeded rows have no workflow: the orphan check would rightly call them gone.
            env["SAS_SUPERVISOR__ORPHAN_AFTER_S"] = "86400"
        engine = None
        try:
            stack.start_temporal()
            stack.start_services(enable_faults=True)
            stack.migrate()
            if args.seeded_open:
                seeding = time.monotonic()
                await load(stack.db_url, 0, 3 * args.seeded_open, open_rows(SEEDED_PREFIX, datetime.now().astimezone()))
                print(f"seeded {args.seeded_open} open tasks in {time.monotonic() - seeding:.1f} s", file=sys.stderr)
            worker = stack.sas_worker(**env)
            supervisor = stack.supervisor(**env)
            wait_log(worker, r"polling", 90)
            client = await sas_client(stack.temporal_address)
            engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
            sessions = state_store.session_factory(engine)
            run_id = uuid.uuid4().hex[:6]
            async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
                failing, healthy = f"load-{run_id}-fail-", f"load-{run_id}-open-"
                charge = {"endpoint": "payment.charge", "kind": "transient", "match_order_prefix": failing}
                (await http.post("/admin/faults", json=charge)).raise_for_status()
                ship = {"endpoint": "shipping.ship", "kind": "hang", "hang_s": 86_400, "match_order_prefix": healthy}
                (await http.post("/admin/faults", json=ship)).raise_for_status()
                gate = asyncio.Semaphore(32)

                async def submit(i: int, prefix: str) -> None:
                    async with gate:
                        await client.start_workflow(
                            "OrderWorkflow", order_payload(i), id=f"{prefix}{i}", task_queue=queue
                        )

                await asyncio.gather(
                    *(submit(i, failing) for i in range(args.tasks)),
                    *(submit(args.tasks + i, healthy) for i in range(args.open)),
                )
                if args.open:
                    await poll(
                        # At ship in the mirror, not hits on the rule: past shipping's bulkhead the
                        # calls wait in its queue, open all the same, without reaching the service.
                        lambda: open_at_ship(sessions, healthy),
                        lambda n: n >= 0.9 * args.open,
                        args.settle_timeout_s,
                        1.0,
                        "the open orders to reach ship",
                    )
                await poll(
                    lambda: in_cooldown(sessions),
                    lambda n: n >= 0.9 * args.tasks,
                    args.settle_timeout_s,
                    1.0,
                    "the failing orders to reach their cool-downs",
                )
                if args.poison:
                    await add_poison(sessions, f"{failing}0")
                start = datetime.now().astimezone()
                probes = [f"probe-{run_id}-{i}" for i in range(args.probes)]
                for i, task_id in enumerate(probes):
                    await http.post(
                        "/admin/faults",
                        json={
                            "endpoint": "inventory.reserve",
                            "kind": "permanent",
                            "status": 422,
                            "error": "out_of_stock",
                            "match_order_id": task_id,
                        },
                    )
                    await client.start_workflow(
                        "OrderWorkflow", order_payload(10_000 + i), id=task_id, task_queue=queue
                    )
                    await asyncio.sleep(args.probe_every_s)  # the probes' spacing: spread over the waves
            waits, taken_in, recorded = [], [], []
            for task_id in probes:
                decided = await decision_of(sessions, task_id, args.settle_timeout_s)
                failed, started, written = await failed_at(client, task_id)
                waits.append((decided - failed).total_seconds())
                if started is not None:
                    taken_in.append((started - failed).total_seconds())
                if written is not None:
                    recorded.append((written - failed).total_seconds())
                print(
                    f"probe={task_id} wait_s={waits[-1]:.2f} taken_in_s={taken_in[-1] if started else None}"
                    f" recorded_s={recorded[-1] if written else None}",
                    file=sys.stderr,
                )
            end = datetime.now().astimezone()
            rate = await decisions_between(sessions, start, end) / max((end - start).total_seconds(), 1e-9)
            peak_rss = peak_rss_mb(supervisor.pid)
            wakes, supervisor_events, took = await supervisor_history(client)
            open_at_end = await open_at_ship(sessions, healthy)
            if open_at_end < 0.9 * args.open:
                raise RuntimeError(f"only {open_at_end} of {args.open} open orders were still open at the end")
            touched = await seeded_touched(sessions) if args.seeded_open else 0
            if touched:
                raise RuntimeError(f"{touched} seeded rows were changed, decided on or due: not the load claimed")
        finally:
            if engine is not None:
                await engine.dispose()
            if pg_name:
                await drop_pg_database(args.pg_admin_url, pg_name)
    return {
        "backend": backend,
        "concurrency": concurrency,
        "tasks": args.tasks,
        "open": args.open,
        "seeded_open": args.seeded_open,
        "poison": args.poison,
        "interval_s": f"{args.interval_s:g}",
        "probe_wait_median_s": round(median(waits), 2),
        "probe_wait_max_s": round(max(waits), 2),
        "probe_wait_max_intervals": round(max(waits) / args.interval_s, 2),
        # The part of the wait spent before a worker took the failure in (the Supervisor decides
        # only once the workflow has): the task worker's lag, not the Supervisor's.
        "probe_taken_in_max_s": round(max(taken_in), 2) if taken_in else None,
        # ...and before the workflow had recorded it in the state store, where the Supervisor reads it.
        "probe_recorded_max_s": round(max(recorded), 2) if recorded else None,
        "decisions_per_s": round(rate, 1),
        "open_at_end": open_at_end,
        # What the failures' wakes cost the Supervisor's workflow over the run, all its runs.
        "supervisor_wakes": wakes,
        "supervisor_events": supervisor_events,
        "supervisor_peak_rss_mb": peak_rss,
        "scan_ms_median": ms(median, took.get("supervisor.scan")),
        "scan_ms_max": ms(max, took.get("supervisor.scan")),
        "scans": len(took.get("supervisor.scan", [])),
        "apply_ms_median": ms(median, took.get("supervisor.apply")),
        "apply_ms_max": ms(max, took.get("supervisor.apply")),
        "orphans_ms_max": ms(max, took.get("supervisor.check_orphans")),
    }


def ms(of: Any, seconds: list[float] | None) -> float | None:
    return round(of(seconds) * 1000, 1) if seconds else None


async def supervisor_history(client: Any) -> tuple[int, int, dict[str, list[float]]]:
    """The wake signals the Supervisor's workflow received, the events its histories hold, and
    each activity's time from its start to its completion, by activity type, over every run of it
    (it continues as new)."""
    from sas.settings import SupervisorSettings

    workflow_id = SupervisorSettings().workflow_id
    wakes = events = 0
    took: dict[str, list[float]] = {}
    async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        events += len(history.events)
        kinds: dict[int, str] = {}
        started: dict[int, datetime] = {}
        for e in history.events:
            if e.HasField("workflow_execution_signaled_event_attributes"):
                wakes += e.workflow_execution_signaled_event_attributes.signal_name == "wake"
            elif e.HasField("activity_task_scheduled_event_attributes"):
                kinds[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            elif e.HasField("activity_task_started_event_attributes"):
                started[e.activity_task_started_event_attributes.scheduled_event_id] = e.event_time.ToDatetime()
            elif e.HasField("activity_task_completed_event_attributes"):
                scheduled = e.activity_task_completed_event_attributes.scheduled_event_id
                if scheduled in started:
                    seconds = (e.event_time.ToDatetime() - started[scheduled]).total_seconds()
                    took.setdefault(kinds[scheduled], []).append(seconds)
    return wakes, events, took


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for backend in args.backends.split(","):
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            started = time.monotonic()
            figures = await run(args, backend, concurrency)
            print(" ".join(f"{k}={v}" for k, v in figures.items()) + f" took_s={time.monotonic() - started:.0f}")
            key = f"{backend}_c{concurrency}"
            summary[f"{key}_max_intervals"] = figures["probe_wait_max_intervals"]
            summary[f"{key}_decisions_per_s"] = figures["decisions_per_s"]
            summary[f"{key}_open_at_end"] = figures["open_at_end"]
            summary[f"{key}_supervisor_wakes"] = figures["supervisor_wakes"]
            summary[f"{key}_peak_rss_mb"] = figures["supervisor_peak_rss_mb"]
            summary[f"{key}_scan_ms_median"] = figures["scan_ms_median"]
            summary[f"{key}_scan_ms_max"] = figures["scan_ms_max"]
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000, help="orders failing at payment (default 1000)")
    parser.add_argument(
        "--open", type=int, default=0, help="more orders, healthy and held open at ship during the probes (default 0)"
    )
    parser.add_argument(
        "--seeded-open",
        type=int,
        default=0,
        help="more healthy open tasks written straight into the state store before the run (default 0)",
    )
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both (default)")
    parser.add_argument("--concurrency", default="16", help="SAS_SUPERVISOR__CONCURRENCY of each run: 1,16 compares")
    parser.add_argument("--interval-s", type=float, default=5.0, help="the Supervisor's interval (default 5)")
    parser.add_argument("--cooldown-s", type=float, default=120.0, help="the ladder's cool-down (default 120)")
    parser.add_argument("--probes", type=int, default=12, help="permanent failures measured (default 12)")
    parser.add_argument("--probe-every-s", type=float, default=10.0, help="between probes (default 10)")
    parser.add_argument("--settle-timeout-s", type=float, default=600)
    parser.add_argument(
        "--pg-admin-url",
        default=os.environ.get("SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    parser.add_argument(
        "--poison", action="store_true", help="put one task's undeliverable decision in the outbox before the probes"
    )
    args = parser.parse_args()
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
