"""The chaos run: orders, trips, fan-outs and parents of child tasks through the real stack while
its parts fail, then the invariants.

    python bench/chaos.py                          # the full run: 200 orders, 100 trips, 20 fan-outs, 20 parents, 6 worker kills
    python bench/chaos.py --database sqlite        # the same on a SQLite state store
    python bench/chaos.py --orders 40 --trips 20 --fan-outs 6 --parents 6 --kills 2    # the short run (CI: tests/chaos/)

Four kinds of task run side by side: the orders (a straight line, reserve → charge → ship), the
chaos trips (bench/_chaos_trip.py: a parallel group, a wait for an approval, a timer and a step
under a ``When``) over services of their own (bench/_chaos_trip_services.py), whose approvals
the run answers the public way as they come to wait (bench/_chaos_trips.py); and the fan-outs
and parents (bench/_chaos_shapes.py: a ``ForEach`` of 8 payments with a ``Tolerance`` of 2, some
refused, some slow or late; a ``ChildTask`` whose child makes a call with its undo, then a step
that may be refused after the child completed), over services of their own
(bench/_chaos_shape_services.py), each one's case fixed by its index (bench/_chaos_shape_plan.py).

It starts, as processes on free ports in a temporary directory:
- ``temporal server start-dev --db-filename <file>`` (persistent, so it can be restarted);
- the remote services with ``--enable-faults`` (``python -m sas_demo_services``, ledger file),
  the trips' services (``python -m bench._chaos_trip_services``, their own ledger file) and the
  fan-outs' and child tasks' (``python -m bench._chaos_shape_services``, theirs);
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
endpoint, compensations included; ``forward`` only on reserve/charge/ship. The trips' and the
shapes' services draw the same rates on their own endpoints (given on their command line, so a
restart keeps them), declines on their charges and payments; and a trip to Atlantis is refused
by both siblings of its parallel group at once.

Process faults at random moments (seeded; the seed is printed): ``kill -9`` of the worker
``--kills`` times (restarted each time), a ``kill -9`` and restart of both services processes
(all three; same ledgers, same ports; the fault rules are posted again), a restart of the Temporal dev
server (same file, same port), a ``kill -9`` and restart of the Supervisor, and a state-store
outage of 4-8 s. On PostgreSQL the database refuses connections (``ALLOW_CONNECTIONS false``
and its sessions terminated): every read and write fails at once. On SQLite another process
holds ``BEGIN EXCLUSIVE`` on the file: no write gets through, writers wait on the lock (busy
timeout 30 s) and an Agent whose attempt cannot wait goes on without its row; reads go on
(WAL). The seed draws the same plan on both backends.

Then it waits (bounded by ``--timeout``) until every task is settled and prints the
invariants, over every task (the child tasks too: bench/_chaos_check.py, and for the fan-outs'
items and the parents bench/_chaos_shape_check.py); the last line is ``orders=… lost=…
duplicates=… inconsistent=… mismatched=… left_behind=… trips=… fan_outs=… parents=…`` followed
by more figures. Exit code 0 only if the five are 0. Every process it started is
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
from bench import _chaos_shape_check as shape_check  # noqa: E402
from bench._chaos_db import ChaosStore, PostgresStore, SqliteStore  # noqa: E402
from bench._chaos_final import demo_voids, temporal_view  # noqa: E402
from bench._chaos_shape_plan import ITEMS, fan_out_input, parent_input, shape_figures  # noqa: E402
from bench._chaos_shapes import CHILD_STEP, FAN_OUT_TYPE, PARENT_TYPE, TOLERATED  # noqa: E402
from bench._chaos_stack import DECLINE, HANG, TASK_TYPE_MODULES, TRANSIENT, Stack, fault_rules  # noqa: E402
from bench._chaos_trip import TASK_TYPE as TRIP_TYPE  # noqa: E402
from bench._chaos_trips import Approver, trip_figures, trip_input  # noqa: E402
from bench._stack import install_signal_exit  # noqa: E402
from sas_orders.demo import order_input  # noqa: E402

# The run submits trips, fan-outs and parents too: its own settings must know their types (read
# once, at first use).
os.environ["SAS_TASK_TYPES__MODULES"] = TASK_TYPE_MODULES

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SERVICES = ("services", "trip_services", "shape_services")  # the processes the services fault restarts
OUTAGE = {"postgres": "refuses connections", "sqlite": "write-locked by another process"}


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
        self.trips = [f"chaos-{args.run_id}-trip-{i:04d}" for i in range(args.trips)]
        self.fan_outs = [f"chaos-{args.run_id}-fan-{i:04d}" for i in range(args.fan_outs)]
        self.parents = [f"chaos-{args.run_id}-parent-{i:04d}" for i in range(args.parents)]
        self.tasks = self.orders + self.trips + self.fan_outs + self.parents
        self.items: list[dict[str, Any]] = []  # the fan-outs' payments and refunds
        self.approver = Approver(self.trips, self.say)
        self.ledger: list[dict[str, Any]] = []
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
        """Add both services' fault hits to the totals (before a restart loses them, and at the end)."""
        try:
            rules = (await http.get("/admin/faults", timeout=5)).json()["faults"]
            trip_hits = (await http.get(f"{self.stack.trip_services_url}/faults", timeout=5)).json()["hits"]
            shape_hits = (await http.get(f"{self.stack.shape_services_url}/faults", timeout=5)).json()["hits"]
        except (httpx.HTTPError, ValueError, KeyError):
            return
        for r in rules:
            self.fault_hits[r["kind"] if r["kind"] != "permanent" else "decline"] += r["hits"]
        self.fault_hits.update(trip_hits)
        self.fault_hits.update(shape_hits)

    # -- submitting

    async def submit_all(self, client: Any) -> None:
        from sas.cli import tasks
        from sas.client.inputs import validate_input
        from sas.settings import Settings, TemporalSettings

        settings = Settings(temporal=TemporalSettings(address=self.stack.temporal_address))
        # Orders and trips interleaved, each kind spread evenly over the submit window.
        work = [(i / len(self.orders), o, "order", order_input(i)) for i, o in enumerate(self.orders)]
        work += [((i + 0.5) / len(self.trips), t, TRIP_TYPE, trip_input(i)) for i, t in enumerate(self.trips)]
        work += [
            ((i + 0.25) / len(self.fan_outs), t, FAN_OUT_TYPE, fan_out_input(i)) for i, t in enumerate(self.fan_outs)
        ]
        work += [((i + 0.75) / len(self.parents), t, PARENT_TYPE, parent_input(i)) for i, t in enumerate(self.parents)]
        gap = self.args.submit_s / max(len(work), 1)
        for _, task_id, task_type, data in sorted(work):
            payload = validate_input(task_type, data, settings.outbound)
            while True:
                try:
                    await tasks.submit(client, settings, task_type, task_id, payload)  # False: already started
                    self.submitted.add(task_id)
                    break
                except Exception as err:
                    if time.monotonic() - self.t0 > self.args.timeout:
                        raise
                    self.say(f"submit {task_id}: {type(err).__name__}: {str(err)[:80]}; retrying")
                    await asyncio.sleep(1.0)
            await asyncio.sleep(gap)

    async def approve(self, client: Any) -> None:
        """Answer the trips' approvals as they come to wait (bench/_chaos_trips.py)."""
        while True:
            await self.approver.answer(client, self.states)
            await asyncio.sleep(1.0)

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
                for name in SERVICES:
                    await self.stack.kill(name)
                self.say(f"kill -9 remote services, trip services and shape services (down {down:.1f}s)")
                await asyncio.sleep(down)
                self.stack.restarts["services"] += 1
                ready = sum([await self.stack.start(name) for name in SERVICES])
                await self.post_faults(http)
                self.injected.append("services-restart")
                self.say(f"all three services restarted after {ready:.1f}s, fault rules posted again")
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

    async def watch(
        self, chaos: asyncio.Task[None], submitting: asyncio.Task[None], *others: asyncio.Task[None]
    ) -> bool:
        """Progress every few seconds until every task is settled (and the chaos is over)."""
        last_print = 0.0
        while time.monotonic() - self.t0 < self.args.timeout:
            for t in (chaos, submitting, *others):
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
            settled = sum(check.settled(self.states.get(o)) for o in self.tasks)
            if time.monotonic() - last_print >= self.args.progress_s:
                last_print = time.monotonic()
                counts = Counter(t.state for t in self.states.values())
                detail = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                self.say(
                    f"submitted={len(self.submitted)}/{len(self.tasks)} settled={settled} {detail} "
                    f"approvals={len(self.approver.verdicts)} faults={len(self.injected)}"
                )
            if self.chaos_done and submitting.done() and settled == len(self.tasks):
                return True
            await asyncio.sleep(1)
        return False

    # -- the end

    async def verdict(self, client: Any, http: httpx.AsyncClient) -> dict[str, list[str]]:
        mirror, alerts = await self.read_mirror()
        trip_books = (await http.get(f"{self.stack.trip_services_url}/ledger", timeout=30)).json()
        shape_books = (await http.get(f"{self.stack.shape_services_url}/ledger", timeout=30)).json()
        children = shape_check.children(self.parents, mirror, CHILD_STEP)
        tasks = self.tasks + children  # a child task is a task of its own, held to every rule
        ours = set(tasks)
        entries = (await http.get("/ledger", timeout=30)).json()["entries"] + trip_books["entries"]
        entries += shape_books["entries"]
        ledger = [e for e in entries if e["order_id"] in ours]
        items, steps = shape_check.split_items(ledger)
        voided = await asyncio.to_thread(demo_voids, self.args.state_dir / "ledger.db")
        voided |= {v["key"] for v in trip_books["voids"] + shape_books["voids"]}
        temporal = await temporal_view(client, tasks, frozenset(children))
        self.states, self.ledger, self.items = mirror, steps, items
        fan_outs = dict.fromkeys(self.fan_outs, ITEMS)
        return {
            "lost": check.lost(tasks, mirror, alerts),
            "duplicates": check.duplicates(ledger),
            "inconsistent": check.inconsistent(tasks, mirror, steps, self.approver.verdicts)
            + shape_check.fan_out_inconsistent(fan_outs, mirror, items, TOLERATED)
            + shape_check.parent_inconsistent(self.parents, mirror, CHILD_STEP),
            "mismatched": check.mismatched(tasks, mirror, temporal),
            "left_behind": check.left_behind(tasks, mirror, steps, voided)
            + shape_check.fan_out_left_behind(fan_outs, mirror, items, voided)
            + shape_check.parent_left_behind(self.parents, mirror, CHILD_STEP),
        }

    async def main(self) -> int:
        args = self.args
        from sas.runtime.connect import connect
        from sas.settings import TemporalSettings

        self.say(
            f"seed={args.seed} orders={args.orders} trips={args.trips} fan_outs={args.fan_outs} "
            f"parents={args.parents} kills={args.kills} fault_scope={args.fault_scope} "
            f"state_dir={args.state_dir} database={self.store.describe()}"
        )
        await self.store.create()
        self.stack = stack = Stack(args.state_dir, self.store.url, args.seed, self.say, args.fault_scope, args.hang_s)
        for name in ("temporal", *SERVICES):
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
            approving = asyncio.create_task(self.approve(client))
            try:
                done = await self.watch(chaos, submitting, approving)
            finally:
                for t in (submitting, chaos, approving):
                    t.cancel()
            self.say(
                "every task settled; checking" if done else f"timeout ({args.timeout:.0f}s): checking what there is"
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
        print(
            "trips: "
            + " ".join(
                f"{k}={v}" for k, v in trip_figures(self.trips, self.states, self.approver, self.ledger).items()
            ),
            flush=True,
        )
        shapes = shape_figures(self.fan_outs, self.parents, self.states, self.items, CHILD_STEP)
        print("shapes: " + " ".join(f"{k}={v}" for k, v in shapes.items()), flush=True)
        counts = {k: len(v) for k, v in found.items()}
        print(
            f"orders={len(self.orders)} lost={counts['lost']} duplicates={counts['duplicates']} "
            f"inconsistent={counts['inconsistent']} mismatched={counts['mismatched']} "
            f"left_behind={counts['left_behind']} trips={len(self.trips)} fan_outs={len(self.fan_outs)} "
            f"parents={len(self.parents)} "
            f"processed={states.get('Processed', 0)} compensated={states.get('Compensated', 0)} "
            f"parked={states.get('Error', 0)} worker_kills={injected['worker-kill']} "
            f"process_faults={len(self.injected)} seed={self.args.seed} elapsed_s={elapsed:.0f}",
            flush=True,
        )
        return 0 if done and not any(counts.values()) else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--orders", type=int, default=200, help="orders to submit (default %(default)s)")
    p.add_argument(
        "--trips",
        type=int,
        default=None,
        help="chaos trips to submit beside the orders (bench/_chaos_trip.py; default: half the orders)",
    )
    p.add_argument(
        "--fan-outs",
        type=int,
        default=None,
        help="chaos fan-outs to submit (bench/_chaos_shapes.py; default: a tenth of the orders)",
    )
    p.add_argument(
        "--parents",
        type=int,
        default=None,
        help="chaos parents of a child task to submit (bench/_chaos_shapes.py; default: a tenth of the orders)",
    )
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
    if args.trips is None:
        args.trips = args.orders // 2
    if args.fan_outs is None:
        args.fan_outs = args.orders // 10
    if args.parents is None:
        args.parents = args.orders // 10
    kinds = (args.orders, args.trips, args.fan_outs, args.parents)
    if min(kinds) < 0 or sum(kinds) == 0:
        p.error("--orders, --trips, --fan-outs and --parents: zero or more each, one task at least")
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
