"""What the partition tests share: the cut-off component as a process in its namespace (a worker,
``python worker.py``, or a Supervisor, ``python -m sas.supervisor``), the other one in the test's
process, and the checks of an outcome from the services' ledger, Temporal and the mirror."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from sas import state_store
from sas.settings import Settings
from sas.supervisor.models import SweepStats
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import TaskResult, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.partitions.netns import Namespace
from tests.stack import ADMIN_TOKEN, Stack, migrated

ROOT = Path(__file__).resolve().parents[2]
FORWARD = ("reserve", "charge", "ship")
UNDO = ("release", "refund")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


@dataclass
class Reach:
    """The addresses the namespace's process uses for each dependency (each through its own pair)."""

    temporal: str
    database: str
    services: str
    payment: str | None = None


def reach(ns: Namespace, settings: Settings, payment_apart: bool = False) -> Reach:
    """A pair per dependency of ``settings``: Temporal, the services (the payment service on a pair
    of its own if ``payment_apart``) and PostgreSQL; a SQLite store is a file, reached as it is."""
    host, port = ns.connect("temporal", *_host_port(settings.temporal.address))
    temporal = f"{host}:{port}"
    url = make_url(settings.services.url)
    host, port = ns.connect("services", url.host or "127.0.0.1", url.port or 80)
    services = f"http://{host}:{port}"
    payment = None
    if payment_apart:
        host, port = ns.connect("payment", url.host or "127.0.0.1", url.port or 80)
        payment = f"http://{host}:{port}"
    database = settings.database.url
    db = make_url(database)
    if db.get_backend_name() == "postgresql":
        host, port = ns.connect("database", db.host or "127.0.0.1", db.port or 5432)
        database = db.set(host=host, port=port).render_as_string(hide_password=False)
    return Reach(temporal, database, services, payment)


def process_env(settings: Settings, where: Reach) -> dict[str, str]:
    """The environment a deployment gives the process: the test's settings, through ``where``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    env |= {
        "SAS_TEMPORAL__ADDRESS": where.temporal,
        "SAS_TEMPORAL__TASK_QUEUE": settings.temporal.task_queue,
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": settings.temporal.supervisor_task_queue,
        "SAS_DATABASE__URL": where.database,
        "SAS_SERVICES__URL": where.services,
        "SAS_SERVICES__ADMIN_TOKEN": ADMIN_TOKEN,
        "SAS_CALLBACKS__SECRET": settings.callbacks.secret.get_secret_value() if settings.callbacks.secret else "",
        "SAS_LOG_LEVEL": "INFO",
    }
    if where.payment is not None:
        env["SAS_SERVICES__PAYMENT__URL"] = where.payment
    for group in ("default_step", "compensation", "supervisor"):
        for name, value in getattr(settings, group).model_dump().items():
            if value is not None and not isinstance(value, dict):
                env[f"SAS_{group.upper()}__{name.upper()}"] = str(value)
    return {k: v for k, v in env.items() if v != ""}


@contextmanager
def spawned(ns: Namespace, argv: list[str], env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` as a process inside ``ns``; killed at the end of the block if still running."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(ns.command(argv), cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


async def polling(process: subprocess.Popen[bytes], log_path: Path) -> None:
    async def says_polling() -> bool:
        return process.poll() is not None or b"polling" in log_path.read_bytes()

    await wait_until(says_polling, timeout=90, what=f"the 'polling' line in {log_path}")
    assert process.poll() is None, log_path.read_text(errors="replace")[-4000:]


WORKER = [sys.executable, str(ROOT / "worker.py")]
SUPERVISOR = [sys.executable, "-m", "sas.supervisor"]


@asynccontextmanager
async def view(client: Client, settings: Settings, services_url: str) -> AsyncIterator[Stack]:
    """The test's own look at the store, Temporal and the services (no worker of its own)."""
    await migrated(settings.database.url)
    engine = state_store.create_engine(settings.database)
    try:
        yield Stack(client, settings, state_store.session_factory(engine), services_url)
    finally:
        await engine.dispose()


@asynccontextmanager
async def supervisor_here(stack: Stack) -> AsyncIterator[None]:
    """A Supervisor worker in the test's process (the root namespace: it reaches everything)."""
    async with build_worker(stack.client, stack.settings, stack.sessions, "test-supervisor"):
        await ensure_supervisor_running(stack.client, stack.settings)
        try:
            yield
        finally:
            await stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id).terminate("test over")


async def status(handle: WorkflowHandle[Any, Any]) -> TaskStatus:
    return await handle.query("status", result_type=TaskStatus)


async def results(handles: list[WorkflowHandle[Any, Any]], timeout: float = 90) -> dict[str, str]:
    """Each task's end state; fails naming the tasks not ended within ``timeout``."""
    waits = {asyncio.ensure_future(h.result()): h.id for h in handles}
    done, late = await asyncio.wait(waits, timeout=timeout)
    for future in late:
        future.cancel()
    assert not late, f"not ended within {timeout}s: {sorted(waits[f] for f in late)}"
    ended: list[TaskResult] = [f.result() for f in done]
    return {r.task_id: r.state.value for r in ended}


async def ledger_problems(stack: Stack, task_id: str, undone: bool) -> list[Any]:
    """Each forward effect once (ship only if not undone), each undo once iff ``undone``, and no
    key used twice: what the services themselves recorded."""
    entries = await stack.ledger(task_id)
    actions = Counter(e["action"] for e in entries)
    want = {"reserve": 1, "charge": 1, "ship": 0 if undone else 1, "release": int(undone), "refund": int(undone)}
    seen = {action: actions[action] for action in (*FORWARD, *UNDO)}
    keys = Counter(e["idempotency_key"] for e in entries)
    problems: list[Any] = []
    if seen != want:
        problems.append((task_id, "ledger", seen, want))
    if any(n > 1 for n in keys.values()):
        problems.append((task_id, "key used twice", keys))
    return problems


async def mirror_view(stack: Stack, task_ids: list[str]) -> dict[str, Any]:
    """Each task's state and (step, state, FailureCount) as the mirror has them."""
    seen: dict[str, Any] = {}
    for task_id in task_ids:
        record = await stack.record(task_id)
        seen[task_id] = (
            None
            if record is None
            else (record.task.state, sorted((s.name, s.state, s.failure_count) for s in record.steps))
        )
    return seen


async def temporal_view(stack: Stack, task_ids: list[str]) -> dict[str, Any]:
    """The same as Temporal's workflows answer it."""
    seen: dict[str, Any] = {}
    for task_id in task_ids:
        got = await status(stack.client.get_workflow_handle(task_id))
        seen[task_id] = (got.state.value, sorted((s.name, s.state.value, s.failure_count) for s in got.steps))
    return seen


async def mirror_agrees(stack: Stack, task_ids: list[str], timeout: float = 60) -> None:
    """The mirror comes to say what Temporal says, task by task and step by step."""
    truth = await temporal_view(stack, task_ids)
    await wait_until(
        lambda: mirror_view(stack, task_ids),
        lambda seen: seen == truth,
        timeout=timeout,
        what=f"the mirror to agree with Temporal: {truth}",
    )


async def supervisor_sweeping(stack: Stack) -> None:
    """The Supervisor workflow has swept at least once (its worker took its work)."""
    handle = stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id)

    async def sweeps() -> int:
        try:
            return int((await handle.query("stats", result_type=SweepStats, rpc_timeout=timedelta(seconds=5))).sweeps)
        except RPCError:
            return 0  # not started yet, or no worker answering

    await wait_until(sweeps, lambda n: n >= 1, timeout=90, what="the Supervisor's first sweep")


async def supervisor_missed(stack: Stack, timeout: float = 60) -> None:
    """Temporal has seen the Supervisor's worker miss its work: a workflow task of the Supervisor
    timed out, or one of its activities is on a later attempt."""
    handle = stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id)

    async def missed() -> bool:
        described = await handle.describe()
        if any(a.attempt >= 2 for a in described.raw_description.pending_activities):
            return True
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_task_timed_out_event_attributes"):
                return True
        return False

    await wait_until(missed, timeout=timeout, interval=0.5, what="Temporal to see the Supervisor miss its work")


async def decision_problems(stack: Stack, expected: dict[str, list[tuple[str, str, int]]]) -> list[Any]:
    """Each task has exactly the decisions expected, (kind, step, FailureCount), each carried out
    (its signal sent) and none recorded twice."""
    problems: list[Any] = []

    async def rows() -> list[Any]:
        return [d for t in expected for d in await stack.decisions(t) if d.kind != "wait"]

    found = await wait_until(
        rows, lambda ds: all(d.signal_sent_at is not None for d in ds), timeout=30, what="the outbox drained"
    )
    for task_id, want in expected.items():
        decided = [(d.kind, d.step, d.failure_count) for d in found if d.task_id == task_id]
        if decided != want:
            problems.append((task_id, "decisions", decided, want))
    return problems


@dataclass
class FailingOrders:
    """Orders whose ship fails: ``retried`` twice, then works (one Supervisor retry completes
    them); ``refused`` for good (the Supervisor undoes them at once)."""

    retried: list[str]
    refused: list[str]
    handles: list[WorkflowHandle[Any, Any]]

    @property
    def ids(self) -> list[str]:
        return self.retried + self.refused


async def submit_failing(stack: Stack, prefix: str, n: int = 2) -> FailingOrders:
    retried = [fresh_id(f"{prefix}-retry") for _ in range(n)]
    refused = [fresh_id(f"{prefix}-refused") for _ in range(n)]
    for task_id in retried:
        await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    for task_id in refused:
        await stack.add_fault(
            endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
        )
    return FailingOrders(retried, refused, [await stack.submit(task_id) for task_id in retried + refused])


async def waiting_at_failed_ship(orders: FailingOrders) -> None:
    """The workers ran each order to its failed ship, where it waits for a decision."""

    async def ships() -> list[str]:
        found = await asyncio.gather(*(status(h) for h in orders.handles))
        return [f"{t.state.value}/{next(s.state.value for s in t.steps if s.name == 'ship')}" for t in found]

    await wait_until(
        ships, lambda seen: seen == ["Failed/Failed"] * len(orders.handles), timeout=60, what="every ship failed"
    )


async def decided_once(stack: Stack, orders: FailingOrders) -> None:
    """The retried orders complete after one retry, the refused ones are undone after one
    compensate, each effect once in the ledger, and the mirror says what Temporal says."""
    ended = await results(orders.handles)
    assert ended == dict.fromkeys(orders.retried, "Processed") | dict.fromkeys(orders.refused, "Compensated"), ended
    problems = await decision_problems(
        stack,
        {t: [("retry", "ship", 1)] for t in orders.retried} | {t: [("compensate", "ship", 1)] for t in orders.refused},
    )
    for task_id in orders.ids:
        problems += await ledger_problems(stack, task_id, undone=task_id in orders.refused)
    assert problems == [], problems
    await mirror_agrees(stack, orders.ids)
