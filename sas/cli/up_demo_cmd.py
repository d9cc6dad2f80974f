"""``sas up`` and ``sas demo``: the whole pattern on this machine, with one command."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sas.cli.demo_plan import DEMO_ENV, check_ledger, demo_plan
from sas.cli.output import CliError, command_line, console, shown, styled, table

if TYPE_CHECKING:
    from sas.runtime.local_stack import LocalStack, LocalStackConfig
    from sas.task_types.demos import DemoPlan


def register(app: typer.Typer) -> None:
    app.command()(up)
    app.command()(demo)


def _stack_options(
    state_dir: Path, temporal_port: int, ui_port: int, services_port: int, **kw: Any
) -> LocalStackConfig:
    from sas.runtime.local_stack import LocalStackConfig

    return LocalStackConfig(
        state_dir=state_dir, temporal_port=temporal_port, ui_port=ui_port, services_port=services_port, **kw
    )


def up(
    workers: int = typer.Option(1, min=1, max=32, help="Worker processes (Scheduler + Agents)."),
    supervisors: int = typer.Option(1, min=1, max=8, help="Supervisor worker processes (one Supervisor acts)."),
    state_dir: Path = typer.Option(Path(".sas"), help="Where the Temporal file, state store, ledger and logs go."),
    temporal_port: int = typer.Option(7233),
    ui_port: int = typer.Option(8233),
    services_port: int = typer.Option(8081),
    enable_faults: bool = typer.Option(False, "--enable-faults", help="Turn on the services' fault-injection API."),
    max_restarts: int = typer.Option(
        5,
        min=1,
        max=100,
        help="A process that exits this many times in a row within a minute of its start stops the stack.",
    ),
) -> None:
    """Start the stack on this machine (no demo tasks) until Ctrl-C or SIGTERM; a process that
    exits is started again, with back-off."""
    _stop_on_sigterm()
    cfg = _stack_options(
        state_dir,
        temporal_port,
        ui_port,
        services_port,
        workers=workers,
        supervisors=supervisors,
        enable_faults=enable_faults,
    )
    stack = _start(cfg)
    try:
        _print_stack(stack)
        env_file = _write_env_file(cfg)
        console.print("To use `sas` against it from another shell:")
        command_line(f"  . {env_file}")
        console.print("Ctrl-C stops everything.")
        _hold(stack, max_restarts)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM before the hold began (while the stack was being described): the
        # same clean stop as during it.
        console.print("stopping")
    finally:
        stack.stop()


def demo(
    count: int = typer.Option(20, "--tasks", min=1, max=1000, help="How many demo tasks."),
    name: str | None = typer.Option(
        None, "--demo", help="Which installed demo (sas.demos entry points); needed only when several are."
    ),
    exit_after: bool = typer.Option(False, "--exit", help="Stop after the summary instead of waiting for Ctrl-C."),
    timeout: float = typer.Option(300, help="Give up waiting for the tasks after this many seconds."),
    state_dir: Path = typer.Option(Path(".sas"), help="Where the Temporal file, state store, ledger and logs go."),
    temporal_port: int = typer.Option(7233),
    ui_port: int = typer.Option(8233),
    services_port: int = typer.Option(8081),
) -> int:
    """Start everything, run an installed demo's tasks with injected faults (the order example's
    orders), and show where each ended."""
    _stop_on_sigterm()
    # The demo is an example's, found as a team's package is: nothing of sas names it.
    _, plan = demo_plan(name, count)
    cfg = _stack_options(state_dir, temporal_port, ui_port, services_port, enable_faults=True, extra_env=dict(DEMO_ENV))
    stack = _start(cfg)
    try:
        os.environ.update(cfg.env())
        from sas.settings import get_settings

        get_settings.cache_clear()
        import asyncio

        results = asyncio.run(_run_tasks(cfg, plan, timeout))
        ok = _summary(results, plan.noun)
        console.print(f"\nTemporal UI: [link]http://localhost:{cfg.ui_port}[/link]")
        console.print(f"logs: {shown(cfg.state_dir / 'logs')}")
        if not exit_after:
            console.print("The stack stays up; Ctrl-C stops everything.")
            _hold(stack)
        return 0 if ok else 1
    finally:
        stack.stop()


def _start(cfg: LocalStackConfig) -> LocalStack:
    from sas.runtime.local_stack import LocalStack

    stack = LocalStack(cfg)
    with console.status("starting") as status:
        try:
            stack.start(lambda name: status.update(f"starting {shown(name)}"))
        except RuntimeError as err:
            raise CliError(str(err)) from None
    return stack


def _print_stack(stack: LocalStack) -> None:
    cfg = stack.config
    console.print(
        table("sas is up", ["process", "pid", "log"], [[c.name, c.process.pid, c.log_path] for c in stack.children()])
    )
    # One address a line: each stays whole (and clickable) on an 80-column terminal.
    console.print(f"Temporal  {cfg.temporal_address}")
    console.print(f"UI        http://localhost:{cfg.ui_port}")
    console.print(f"services  {cfg.services_url}")


# A setting whose name says it holds a secret is not copied into the env file, only named.
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def _inherited_settings(written: dict[str, str]) -> list[str]:
    """The SAS_* settings of this shell that the stack's processes inherit and the file would
    otherwise leave out: per-service settings (``SAS_SERVICES__FLIGHTS__URL``), the task type
    modules (``SAS_TASK_TYPES__MODULES``) and the like, so a command run after ``. .sas/env``
    sees what the worker sees. A secret is named in a comment, not written."""
    import shlex

    lines = []
    for key, value in sorted(os.environ.items()):
        if not key.startswith("SAS_") or key in written:
            continue
        if any(word in key.upper() for word in _SECRET_WORDS):
            lines.append(f"# {key} is set where `sas up` runs: a secret, not written here\n")
        else:
            lines.append(f"export {key}={shlex.quote(value)}\n")
    return lines


def _write_env_file(cfg: LocalStackConfig) -> Path:
    """The stack's settings as shell exports, in ``<state_dir>/env``: one short line to print
    instead of exports whose values (absolute paths) run past 80 columns."""
    import shlex

    lines = []
    for key, value in cfg.env().items():
        # The admin token is a secret: the file points at the token's file instead of holding it.
        shown = (
            f'"$(cat {shlex.quote(str(cfg.admin_token_file.resolve()))})"'
            if key == "SAS_SERVICES__ADMIN_TOKEN"
            else shlex.quote(value)
        )
        lines.append(f"export {key}={shown}\n")
    lines += _inherited_settings(cfg.env())
    path = cfg.state_dir / "env"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write("".join(lines))
    return path


def _stop_on_sigterm() -> None:
    """SIGTERM stops the stack as Ctrl-C does, through the ``finally`` that stops every process:
    nothing outlives ``sas up``."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _hold(stack: LocalStack, max_restarts: int = 5) -> None:
    """Until Ctrl-C or SIGTERM: start again what exits (sas.runtime.restarts), one line each;
    stop with one line when Temporal exits or a process keeps crashing."""
    from sas.runtime.restarts import RestartPolicy, StackDown, StackKeeper

    # Temporal holds everything the others need: a crash of it is not papered over.
    keeper = StackKeeper(
        stack.group,
        restartable=lambda child: child.name != "temporal",
        policy=RestartPolicy(max_quick_exits=max_restarts),
    )
    try:
        while True:
            try:
                restarted = keeper.tend()
            except StackDown as err:
                raise CliError(f"{err}; stopping the stack") from None
            for line in restarted:
                console.print(f"sas: {shown(line)}", soft_wrap=True)
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")


async def _run_tasks(cfg: LocalStackConfig, demo: DemoPlan, timeout: float) -> list[dict[str, Any]]:
    import asyncio

    import httpx
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sas.cli import tasks
    from sas.client.inputs import validate_input
    from sas.runtime.connect import connect
    from sas.settings import get_settings
    from sas.state_store import create_engine, session_factory
    from sas.state_store.queries import alerts_for, decisions_for, get_task
    from sas.task_models import TaskState

    settled_states = (TaskState.PROCESSED, TaskState.COMPENSATED, TaskState.ERROR)
    settings = get_settings()
    client = await connect(settings.temporal, encryption=settings.encryption)
    run = time.strftime("%H%M%S")
    plan = [(f"demo-{run}-{i:03d}-{case.name}", case) for i, case in enumerate(demo.cases)]
    async with httpx.AsyncClient(base_url=cfg.services_url, headers=cfg.admin_headers, timeout=10) as http:
        for task_id, case in plan:
            for fault in case.faults:
                (await http.post("/admin/faults", json={**fault, "match_order_id": task_id})).raise_for_status()
            payload = validate_input(demo.task_type, case.input, settings.outbound)
            await tasks.submit(client, settings, demo.task_type, task_id, payload)
        terminators = [
            asyncio.create_task(_terminate_during(client, settings, task_id, case.terminate_during))
            for task_id, case in plan
            if case.terminate_during
        ]

        engine = create_engine(settings.database)
        sessions = session_factory(engine)
        states: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        columns = (
            TextColumn(demo.noun),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task(demo.noun, total=len(plan), detail="")
            while time.monotonic() < deadline:
                async with sessions() as session:
                    for task_id, _ in plan:
                        record = await get_task(session, task_id)
                        states[task_id] = record.task.state if record else TaskState.PENDING
                settled = sum(s in settled_states for s in states.values())
                counts = {s: list(states.values()).count(s) for s in sorted(set(states.values()))}
                progress.update(bar, completed=settled, detail="  ".join(f"{k}:{v}" for k, v in counts.items()))
                if settled == len(plan):
                    break
                await asyncio.sleep(0.5)
        for terminator in terminators:
            terminator.cancel()
        results = []
        for task_id, case in plan:
            entries = (await http.get("/ledger", params={"order_id": task_id})).json()["entries"]
            state = states.get(task_id, TaskState.PENDING)
            problems = check_ledger(state, entries, demo.undo_actions)
            if state != case.expected:
                problems.insert(0, f"expected {case.expected}")
            async with sessions() as session:
                notes = _notes(await decisions_for(session, task_id), await alerts_for(session, task_id))
            results.append(
                {
                    "task_id": task_id,
                    "case": case.name,
                    "state": state,
                    "expected": case.expected,
                    "problems": problems,
                    "what": case.what,
                    "notes": notes,
                }
            )
        await engine.dispose()
    return results


async def _terminate_during(client: Any, settings: Any, task_id: str, step: str) -> None:
    """Terminate the workflow while ``step`` runs, as someone might from the UI."""
    import asyncio

    from sas.state_store import create_engine, session_factory
    from sas.state_store.queries import get_task
    from sas.task_models import StepState

    engine = create_engine(settings.database)
    try:
        while True:
            async with session_factory(engine)() as session:
                record = await get_task(session, task_id)
            if record and any(s.name == step and s.state == StepState.PROCESSING for s in record.steps):
                await client.get_workflow_handle(task_id).terminate("sas demo: terminated mid-saga")
                return
            await asyncio.sleep(0.3)
    finally:
        await engine.dispose()


def _notes(decisions: list[Any], alerts: list[Any]) -> str:
    """What the Supervisor did for a task, in a few words, for the summary."""
    notes = []
    if any(a.kind == "cooldown" for a in alerts) or any(d.kind == "wait" for d in decisions):
        notes.append("cool-down")
    if any(d.kind == "cleanup" for d in decisions):
        notes.append("terminated; cleaned up by the Supervisor")
    retries = sum(d.kind == "retry" for d in decisions)
    if retries:
        notes.append(f"{retries} Supervisor retr{'y' if retries == 1 else 'ies'}")
    if any(d.kind == "park" for d in decisions):
        notes.append("parked")
    return ", ".join(notes)


def _summary(results: list[dict[str, Any]], noun: str) -> bool:
    from sas.task_models import TaskState

    groups = {
        TaskState.PROCESSED: "completed",
        TaskState.COMPENSATED: "compensated",
        TaskState.ERROR: "waiting for an operator",
    }
    rows = []
    for state, label in groups.items():
        ids = [r["task_id"] for r in results if r["state"] == state]
        rows.append([styled(state), label, len(ids), "\n".join(ids)])
    other = [r for r in results if r["state"] not in groups]
    if other:
        rows.append(["other", "not settled", len(other), "\n".join(f"{r['task_id']} ({r['state']})" for r in other)])
    console.print(table("demo summary", ["state", "meaning", noun, "task ids"], rows, ids=(3,)))
    noted = [r for r in results if r["notes"]]
    if noted:
        console.print(
            table(
                "what the Supervisor did",
                ["task", "state", "path"],
                [[r["task_id"], styled(r["state"]), r["notes"]] for r in noted],
            )
        )
    wrong = [r for r in results if r["problems"]]
    if wrong:
        console.print(
            table(
                f"{noun} that did not end where their faults put them",
                ["task", "state", "problem"],
                [[r["task_id"], r["state"], "; ".join(r["problems"])] for r in wrong],
            )
        )
        return False
    console.print(
        f"[green]all {len(results)} {noun} ended where their faults put them; ledger and state store agree[/green]"
    )
    return True
