"""The chaos run: orders through the real stack while its parts fail, then the invariants.

    python bench/chaos.py                          # the full run: 200 orders, 6 worker kills
    python bench/chaos.py --database sqlite        # the same on a SQLite state store
    python bench/chaos.py --orders 40 --kills 2    # the short run (CI: tests/chaos/)

It starts, as processes on free ports in a temporary directory:
- ``temporal server start-dev --db-filename <file>`` (persistent, so it can be restarted);
- the remote services with ``--enable-faults`` (``python -m sas.remote_services``, ledger file);
- one worker (``python worker.py``) and one Supervisor (``python -m sas.supervisor``),
  with the demo's quick timings (``sas.cli.demo_plan.DEMO_ENV``) and a state store that
  ``--database`` chooses: ``postgres`` (default), a fresh database on the server of ``--pg-url``
  (default ``127.0.0.1:5432``, user postgres), dropped at the end; or ``sqlite``, the file
  ``<state dir>/state.db`` (bench/_chaos_db.py).

Every process runs this checkout's code: the source tree is copied into ``<state dir>/src`` at
the start (restarts run the same copy), and the run and its processes start with
``python -S`` and a PYTHONPATH of that code, its ``examples/*/`` and the venv's other packages,
so an editable install pointing at another working tree (its task types' entry points) is not
seen (bench/_chaos_env.py).

Remote faults (``POST /admin/faults``; exact per-call rates, see docs/reliability.md):
transient 5xx on 20 % of calls, hangs past complete-by on 5 %, ``card_declined`` on 3 %
of charges. ``--fault-scope all`` (default) puts the transient faults and hangs on every
endpoint, compensations included; ``forward`` only on reserve/charge/ship.

Process faults at random moments (seeded; the seed is printed): ``kill -9`` of the worker
``--kills`` times (restarted each time), a ``kill -9`` and restart of the remote services
(same ledger, same port; the fault rules are posted again), a restart of the Temporal dev
server (same file, same port), a ``kill -9`` and restart of the Supervisor, and a state-store
outage of 4-8 s. On PostgreSQL the database refuses connections (``ALLOW_CONNECTIONS false``
and its sessions terminated): every read and write fails at once. On SQLite another process
holds ``BEGIN EXCLUSIVE`` on the file: no write gets through, writers wait on the lock (busy
timeout 30 s) and an Agent whose attempt cannot wait goes on without its row; reads go on
(WAL). The seed draws the same plan on both backends.

Then it waits (bounded by ``--timeout``) until every order is settled and prints the
invariants; the last line is ``orders=… lost=… duplicates=… inconsistent=… mismatched=…``
followed by more figures. Exit code 0 only if the four are 0. Every process it started is
stopped on the way out (Ctrl-C too; they also die with it), and a PostgreSQL database is
dropped (a SQLite file goes with the state dir).
Logs: ``<state dir>/logs/*.log`` (kept when the run fails, or with ``--keep``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _chaos_env  # noqa: E402 - the standard library only

if __name__ == "__main__" and _chaos_env.SITE_ENV not in os.environ:
    # Start again isolated, before anything imports a task type: this checkout's code and
    # examples, the venv's other packages, none of its editable installs (bench/_chaos_env.py).
    _site = _chaos_env.build_site(ROOT)
    os.execve(
        sys.executable,
        [sys.executable, "-S", str(Path(__file__).resolve()), *sys.argv[1:]],
        {**os.environ, _chaos_env.SITE_ENV: str(_site), "PYTHONPATH": _chaos_env.pythonpath(ROOT, _site)},
    )

import httpx  # noqa: E402

from bench import _chaos_check as check  # noqa: E402
from bench._chaos_db import ChaosStore, PostgresStore, SqliteStore  # noqa: E402
from bench._stack import install_signal_exit  # noqa: E402
from sas.cli.demo_plan import DEMO_ENV  # noqa: E402
from sas.remote_services.launcher import free_port  # noqa: E402
from sas.runtime.local_stack import LoopbackStack, temporal_binary  # noqa: E402
from sas.runtime.processes import Child, ProcessGroup, wait_for_async  # noqa: E402
from sas.runtime.readiness import http_healthy, temporal_healthy  # noqa: E402
from sas.task_models.search_attributes import dev_server_flags  # noqa: E402
from sas_orders.demo import order_input  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
FORWARD = ("inventory.reserve", "payment.charge", "shipping.ship")
UNDO = ("inventory.release", "payment.refund", "shipping.cancel")
TRANSIENT, HANG, DECLINE = 0.20, 0.05, 0.03
OUTAGE = {"postgres": "refuses connections", "sqlite": "write-locked by another process"}


def fault_rules(scope: str, hang_s: float) -> list[dict[str, Any]]:
    """Rules with exact per-call rates. A call takes the first rule whose dice fire, so a
    later rule's probability is conditioned on the earlier ones not firing."""
    rules: list[dict[str, Any]] = []
    for endpoint in FORWARD + (UNDO if scope == "all" else ()):
        taken = 0.0
        if endpoint == "payment.charge":
            rules.append(
                {
                    "endpoint": endpoint,
                    "kind": "permanent",
                    "probability": DECLINE,
                    "status": 402,
                    "error": "card_declined",
                    "message": "the card was declined (injected fault)",
                }
            )
            taken += DECLINE
        rules.append(
            {"endpoint": endpoint, "kind": "hang", "probability": round(HANG / (1 - taken), 6), "hang_s": hang_s}
        )
        taken += HANG
        rules.append(
            {"endpoint": endpoint, "kind": "transient", "probability": round(TRANSIENT / (1 - taken), 6), "status": 503}
        )
    return rules


class Stack(LoopbackStack):
    """The processes of one chaos run, each restartable on its own port and files."""

    def __init__(self, state_dir: Path, db_url: str, seed: int, log: Any) -> None:
        self.dir = state_dir
        self.group = ProcessGroup(state_dir / "logs")
        self.log = log
        self.seed = seed
        self.temporal_port, self.http_port, self.services_port = free_port(), free_port(), free_port()
        self.db_url = db_url
        self.children: dict[str, Child] = {}
        # The code under test, frozen at the start: every restarted process runs the same
        # version even if the working tree changes meanwhile (a changed workflow would
        # otherwise fail to replay the histories its predecessor wrote).
        self.src = state_dir / "src"
        shutil.copytree(
            ROOT,
            self.src,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", ".sas", "__pycache__", "*.egg-info", "tests", "docs", ".pytest_cache"
            ),
            dirs_exist_ok=True,
        )
        # The snapshot and its examples, the run's site view; `python -S` (bench/_chaos_env.py).
        self.pythonpath = _chaos_env.pythonpath(self.src, Path(os.environ[_chaos_env.SITE_ENV]))
        self.restarts: Counter[str] = Counter()
        self.down: set[str] = set()  # stopped on purpose, being restarted

    def env(self) -> dict[str, str]:
        return {
            **DEMO_ENV,
            **self.stack_env(self.db_url),
            "SAS_LOG_LEVEL": "INFO",
            "PYTHONPATH": self.pythonpath,
            "PYTHONUNBUFFERED": "1",
        }

    # The waiting is async so orders keep flowing meanwhile.
    def spawn(self, name: str) -> tuple[Child, int]:
        log_path = self.group.log_dir / f"{name}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        if name == "temporal":
            child = self.group.spawn(
                name,
                [
                    temporal_binary(),
                    "server",
                    "start-dev",
                    "--db-filename",
                    str(self.dir / "temporal.db"),
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(self.temporal_port),
                    "--http-port",
                    str(self.http_port),
                    "--headless",
                    "--log-level",
                    "warn",
                    *dev_server_flags(),
                ],
            )
        elif name == "services":
            child = self.group.python(
                name,
                [
                    "-S",
                    "-P",
                    "-m",
                    "sas.remote_services",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.services_port),
                    "--ledger",
                    str(self.dir / "ledger.db"),
                    "--enable-faults",
                    "--fault-seed",
                    str(self.seed + self.restarts[name]),
                ],
                {"PYTHONPATH": self.pythonpath, "SAS_SERVICES__ADMIN_TOKEN": self.admin_token},
            )
        elif name == "worker":
            child = self.group.python(name, ["-S", "-P", str(self.src / "worker.py")], self.env())
        elif name == "supervisor":
            child = self.group.python(name, ["-S", "-P", "-m", "sas.supervisor"], self.env())
        elif name == "migrate":
            child = self.group.python(name, ["-S", "-P", "-m", "sas.cli.main", "migrate"], self.env())
        else:
            raise ValueError(name)
        self.children[name] = child
        self.down.discard(name)
        return child, offset

    async def start(self, name: str, timeout: float = 90.0) -> float:
        started = time.monotonic()
        child, offset = self.spawn(name)
        if name == "temporal":
            await self._until(
                lambda: temporal_healthy(self.temporal_address), child, timeout, "Temporal's health check"
            )
        elif name == "services":
            await self._until(lambda: http_healthy(self.services_url), child, timeout, "services /healthz")
        elif name in ("worker", "supervisor"):
            await self._until(
                lambda: "polling" in _read_from(child.log_path, offset), child, timeout, "'polling' in its log"
            )
        return time.monotonic() - started

    async def migrate(self) -> None:
        child, _ = self.spawn("migrate")
        while child.process.poll() is None:
            await asyncio.sleep(0.2)
        if child.process.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{child.log_tail()}")

    async def _until(self, ok: Any, child: Child, timeout: float, what: str) -> None:
        await wait_for_async(ok, child, timeout, what)

    async def kill(self, name: str) -> None:
        self.down.add(name)
        self.children[name].kill()  # SIGKILL to its process group

    async def terminate(self, name: str, grace: float = 20.0) -> None:
        child = self.children[name]
        self.down.add(name)
        child.send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while child.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if child.alive():
            child.kill()

    def dead(self) -> list[str]:
        return [n for n, c in self.children.items() if n != "migrate" and n not in self.down and not c.alive()]

    def stop(self) -> None:
        self.group.stop_all()


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------ the run


def make_store(args: argparse.Namespace) -> ChaosStore:
    if args.database == "sqlite":
        return SqliteStore(args.state_dir / "state.db")
    return PostgresStore(args.pg_url, f"sas_chaos_{args.run_id}")


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.t0 = time.monotonic()
        self.orders = [f"chaos-{args.run_id}-{i:04d}" for i in range(args.orders)]
        self.submitted: set[str] = set()
        self.injected: list[str] = []
        self.fault_hits: Counter[str] = Counter()
        self.states: dict[str, check.MirrorTask] = {}
        self.chaos_done = False
        self.store = make_store(args)

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)

    # -- remote faults

    async def post_faults(self, http: httpx.AsyncClient) -> None:
        for rule in fault_rules(self.args.fault_scope, self.args.hang_s):
            (await http.post("/admin/faults", json=rule)).raise_for_status()

    async def count_hits(self, http: httpx.AsyncClient) -> None:
        """Add the services' rule hits to the totals (before a restart loses them, and at the end)."""
        try:
            rules = (await http.get("/admin/faults", timeout=5)).json()["faults"]
        except (httpx.HTTPError, ValueError, KeyError):
            return
        for r in rules:
            self.fault_hits[r["kind"] if r["kind"] != "permanent" else "decline"] += r["hits"]

    # -- submitting

    async def submit_all(self, client: Any) -> None:
        from sas.cli import tasks
        from sas.client.inputs import validate_input
        from sas.settings import Settings, TemporalSettings

        settings = Settings(temporal=TemporalSettings(address=self.stack.temporal_address))
        gap = self.args.submit_s / max(len(self.orders), 1)
        for index, order in enumerate(self.orders):
            payload = validate_input("order", order_input(index), settings.outbound)
            while True:
                try:
                    await tasks.submit(client, settings, "order", order, payload)  # False: it was already started
                    self.submitted.add(order)
                    break
                except Exception as err:
                    if time.monotonic() - self.t0 > self.args.timeout:
                        raise
                    self.say(f"submit {order}: {type(err).__name__}: {str(err)[:80]}; retrying")
                    await asyncio.sleep(1.0)
            await asyncio.sleep(gap)

    # -- process faults

    def plan(self) -> list[tuple[float, str]]:
        kinds = ["worker"] * self.args.kills + ["services", "temporal", "supervisor", "database"]
        self.rng.shuffle(kinds)
        start, end = self.args.chaos_start_s, self.args.chaos_start_s + self.args.chaos_s
        return sorted(zip(sorted(self.rng.uniform(start, end) for _ in kinds), kinds, strict=True))

    async def chaos(self, http: httpx.AsyncClient) -> None:
        plan = self.plan()
        self.say("process faults planned: " + ", ".join(f"{k}@{t:.0f}s" for t, k in plan))
        for at, kind in plan:
            delay = at - (time.monotonic() - self.t0)
            if delay > 0:
                await asyncio.sleep(delay)
            down = self.rng.uniform(0.5, 3.0)
            if kind == "worker":
                await self.stack.kill("worker")
                self.say(f"kill -9 worker (down {down:.1f}s)")
                await asyncio.sleep(down)
                ready = await self.stack.start("worker")
                self.injected.append("worker-kill")
                self.say(f"worker restarted, polling after {ready:.1f}s")
            elif kind == "supervisor":
                await self.stack.kill("supervisor")
                self.say(f"kill -9 supervisor (down {down:.1f}s)")
                await asyncio.sleep(down)
                ready = await self.stack.start("supervisor")
                self.injected.append("supervisor-restart")
                self.say(f"supervisor restarted, polling after {ready:.1f}s")
            elif kind == "services":
                await self.count_hits(http)
                await self.stack.kill("services")
                self.say(f"kill -9 remote services (down {down:.1f}s)")
                await asyncio.sleep(down)
                self.stack.restarts["services"] += 1
                ready = await self.stack.start("services")
                await self.post_faults(http)
                self.injected.append("services-restart")
                self.say(f"remote services restarted after {ready:.1f}s, fault rules posted again")
            elif kind == "temporal":
                await self.stack.terminate("temporal")
                self.say(f"Temporal dev server stopped (down {down:.1f}s)")
                await asyncio.sleep(down)
                ready = await self.stack.start("temporal")
                self.injected.append("temporal-restart")
                self.say(f"Temporal dev server restarted (same file, same port) after {ready:.1f}s")
            elif kind == "database":
                seconds = self.rng.uniform(4.0, 8.0)
                self.say(f"database {OUTAGE[self.args.database]} for {seconds:.1f}s")
                await self.store.outage(seconds)
                self.injected.append("db-outage")
                self.say("database reachable again")
        self.chaos_done = True

    # -- watching

    async def read_mirror(self) -> tuple[dict[str, check.MirrorTask], dict[str, list[tuple[str, str]]]]:
        return await self.store.read_mirror(f"chaos-{self.args.run_id}-")

    async def watch(self, chaos: asyncio.Task[None], submitting: asyncio.Task[None]) -> bool:
        """Progress every few seconds until every order is settled (and the chaos is over)."""
        last_print = 0.0
        while time.monotonic() - self.t0 < self.args.timeout:
            for t in (chaos, submitting):
                if t.done() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            dead = self.stack.dead()
            if dead:
                raise RuntimeError(f"{dead[0]} died on its own:\n{self.stack.children[dead[0]].log_tail()}")
            try:
                self.states, _ = await self.read_mirror()
            except Exception as err:  # noqa: BLE001 - the database may be the fault right now
                self.say(f"(state store unreadable: {type(err).__name__})")
                await asyncio.sleep(1)
                continue
            settled = sum(check.settled(self.states.get(o)) for o in self.orders)
            if time.monotonic() - last_print >= self.args.progress_s:
                last_print = time.monotonic()
                counts = Counter(t.state for t in self.states.values())
                detail = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                self.say(
                    f"submitted={len(self.submitted)}/{len(self.orders)} settled={settled} {detail} "
                    f"faults={len(self.injected)}"
                )
            if self.chaos_done and submitting.done() and settled == len(self.orders):
                return True
            await asyncio.sleep(1)
        return False

    # -- the end

    async def temporal_view(self, client: Any) -> dict[str, check.TemporalView]:
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError, RPCStatusCode

        from sas.task_models import TaskResult, TaskStatus

        gate = asyncio.Semaphore(16)

        async def one(order: str) -> tuple[str, check.TemporalView]:
            async with gate:
                handle = client.get_workflow_handle(order)
                described = await handle.describe()
                status = WorkflowExecutionStatus(described.status).name if described.status else "UNKNOWN"
                view = check.TemporalView(status=status)
                if status == "COMPLETED":
                    result = await client.get_workflow_handle(order, result_type=TaskResult).result()
                    view.state, view.steps = str(result.state), {s.name: str(s.state) for s in result.steps}
                elif status == "RUNNING":
                    q = await handle.query("status", result_type=TaskStatus)
                    view.state, view.steps = str(q.state), {s.name: str(s.state) for s in q.steps}
                else:
                    try:
                        c = await client.get_workflow_handle(f"cleanup-{order}").describe()
                        view.cleanup = WorkflowExecutionStatus(c.status).name if c.status else "UNKNOWN"
                    except RPCError as err:
                        if err.status != RPCStatusCode.NOT_FOUND:
                            raise
                return order, view

        return dict(await asyncio.gather(*(one(o) for o in self.orders)))

    async def verdict(self, client: Any, http: httpx.AsyncClient) -> dict[str, list[str]]:
        mirror, alerts = await self.read_mirror()
        ledger = (await http.get("/ledger", timeout=30)).json()["entries"]
        ours = set(self.orders)
        ledger = [e for e in ledger if e["order_id"] in ours]
        temporal = await self.temporal_view(client)
        self.states, self.ledger = mirror, ledger
        return {
            "lost": check.lost(self.orders, mirror, alerts),
            "duplicates": check.duplicates(ledger),
            "inconsistent": check.inconsistent(self.orders, mirror, ledger),
            "mismatched": check.mismatched(self.orders, mirror, temporal),
        }

    async def main(self) -> int:
        args = self.args
        from sas.runtime.connect import connect
        from sas.settings import TemporalSettings

        self.say(
            f"seed={args.seed} orders={args.orders} kills={args.kills} fault_scope={args.fault_scope} "
            f"state_dir={args.state_dir} database={self.store.describe()}"
        )
        await self.store.create()
        self.stack = stack = Stack(args.state_dir, self.store.url, args.seed, self.say)
        for name in ("temporal", "services"):
            self.say(f"{name} ready after {await stack.start(name):.1f}s")
        await stack.migrate()
        for name in ("worker", "supervisor"):
            self.say(f"{name} ready after {await stack.start(name):.1f}s")
        async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
            await self.post_faults(http)
            self.say(
                f"remote faults posted ({args.fault_scope} endpoints): transient {TRANSIENT:.0%}, "
                f"hang {HANG:.0%} (hang_s={args.hang_s:g}), card_declined {DECLINE:.0%} of charges"
            )
            client = await connect(TemporalSettings(address=stack.temporal_address), "chaos")
            self.t0 = time.monotonic()
            submitting = asyncio.create_task(self.submit_all(client))
            chaos = asyncio.create_task(self.chaos(http))
            try:
                done = await self.watch(chaos, submitting)
            finally:
                for t in (submitting, chaos):
                    t.cancel()
            self.say(
                "every order settled; checking" if done else f"timeout ({args.timeout:.0f}s): checking what there is"
            )
            # The mirror can be a moment ahead of Temporal (an Agent records Processed before its
            # workflow completes): give the last workflows a short grace to close.
            grace_end = time.monotonic() + args.grace_s
            while True:
                found = await self.verdict(client, http)
                if not any(found.values()) or time.monotonic() > grace_end:
                    break
                await asyncio.sleep(2)
            await self.count_hits(http)
        return self.report(found, done)

    def report(self, found: dict[str, list[str]], done: bool) -> int:
        for name, problems in found.items():
            for p in problems[:20]:
                print(f"  {name}: {p}", flush=True)
        elapsed = time.monotonic() - self.t0
        states = Counter(t.state for o, t in self.states.items())
        actions = Counter(e["action"] for e in self.ledger)
        injected = Counter(self.injected)
        print(
            "states: "
            + " ".join(f"{k}={v}" for k, v in sorted(states.items()))
            + " | ledger: "
            + " ".join(f"{k}={v}" for k, v in sorted(actions.items()))
            + " | remote faults hit: "
            + " ".join(f"{k}={v}" for k, v in sorted(self.fault_hits.items()))
            + " | process faults: "
            + " ".join(f"{k}={v}" for k, v in sorted(injected.items())),
            flush=True,
        )
        counts = {k: len(v) for k, v in found.items()}
        print(
            f"orders={len(self.orders)} lost={counts['lost']} duplicates={counts['duplicates']} "
            f"inconsistent={counts['inconsistent']} mismatched={counts['mismatched']} "
            f"processed={states.get('Processed', 0)} compensated={states.get('Compensated', 0)} "
            f"parked={states.get('Error', 0)} worker_kills={injected['worker-kill']} "
            f"process_faults={len(self.injected)} seed={self.args.seed} elapsed_s={elapsed:.0f}",
            flush=True,
        )
        return 0 if done and not any(counts.values()) else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--orders", type=int, default=200, help="orders to submit (default %(default)s)")
    p.add_argument("--kills", type=int, default=6, help="kill -9 of the worker, each restarted (default %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: random, printed)")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="give up waiting after this many seconds from the first order (default: 300 + 2 s per order)",
    )
    p.add_argument(
        "--submit-s",
        type=float,
        default=None,
        help="spread the orders over this long (default: 0.4 s per order, 20..120)",
    )
    p.add_argument("--chaos-start-s", type=float, default=3.0, help="first process fault no earlier than this")
    p.add_argument(
        "--chaos-s", type=float, default=None, help="process faults fall in this window (default: submit-s + 15)"
    )
    p.add_argument(
        "--fault-scope",
        choices=("all", "forward"),
        default="all",
        help="endpoints the transient faults and hangs hit: all (undo too) or forward only",
    )
    p.add_argument("--hang-s", type=float, default=60.0, help="how long a hang lasts unless the caller gives up")
    p.add_argument("--grace-s", type=float, default=20.0, help="after settling, how long to let Temporal catch up")
    p.add_argument("--progress-s", type=float, default=5.0, help="seconds between progress lines")
    p.add_argument(
        "--database",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="the state store: a fresh PostgreSQL database, or a SQLite file in the state dir (default %(default)s)",
    )
    p.add_argument("--pg-url", default=PG_ADMIN, help="PostgreSQL admin DSN; a fresh database is created there")
    p.add_argument("--state-dir", type=Path, default=None, help="where files and logs go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the state dir and the database")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    if args.submit_s is None:
        args.submit_s = min(max(0.4 * args.orders, 20.0), 120.0)
    if args.chaos_s is None:
        args.chaos_s = args.submit_s + 15.0
    if args.timeout is None:
        args.timeout = 300.0 + 2.0 * args.orders
    args.run_id = uuid.uuid4().hex[:6]
    args.own_dir = args.state_dir is None
    args.state_dir = (args.state_dir or Path(tempfile.mkdtemp(prefix="sas-chaos-"))).resolve()
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    install_signal_exit()  # SIGTERM/SIGHUP end the run through the finally below
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C too, even when started in the background
    run = Run(args)
    code = 1
    try:
        code = asyncio.run(run.main())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        code = 130
    except SystemExit as exc:
        code = int(exc.code or 1)
    except Exception as err:  # noqa: BLE001 - report, clean up, fail
        print(f"chaos run failed: {type(err).__name__}: {err}", flush=True)
    finally:
        stack = getattr(run, "stack", None)
        if stack is not None:
            stack.stop()
        if not args.keep:
            try:
                asyncio.run(run.store.drop())
            except Exception as err:  # noqa: BLE001
                print(f"could not drop {run.store.describe()}: {err}", file=sys.stderr, flush=True)
        if os.environ.get(_chaos_env.SITE_ENV):
            _chaos_env.remove_site(Path(os.environ[_chaos_env.SITE_ENV]))
        if code == 0 and args.own_dir and not args.keep:
            shutil.rmtree(args.state_dir, ignore_errors=True)
        else:
            # stderr: the invariants stay the last line of stdout.
            print(f"logs: {args.state_dir / 'logs'}", file=sys.stderr, flush=True)
    # Skip the interpreter's shutdown: temporalio's Rust bridge can abort it (sdk-python #300).
    from sas.runtime.entry import exit_hard

    exit_hard(code)


if __name__ == "__main__":
    main()
