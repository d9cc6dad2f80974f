"""``sas services``: each remote service's circuit breaker and task queue, and the operator's
hand on the breaker (``sas services open|close NAME``, audited); ``sas services serve`` runs
the demo's remote services (``examples/demo_services``, found through its entry point)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, ago, console, print_json, shown, table

services_app = typer.Typer(
    help="Remote services: circuit breakers and queues (force a breaker open or closed); `serve` runs them.",
    invoke_without_command=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(services_app, name="services")


JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


@services_app.callback()
def services(ctx: typer.Context, as_json: bool = JSON) -> None:
    """Each service's breaker: state, failure rate over the workers' windows, since when, next probe."""
    if ctx.invoked_subcommand is not None:
        return
    rows = context.run(lambda: context.with_read_session(_rows))
    if as_json:
        print_json(rows)
        return
    now = datetime.now(UTC)
    console.print(
        table(
            "remote services",
            ["service", "breaker", "since", "failures", "next probe", "holds"],
            [
                [
                    r["service"],
                    r["state"] + (" (forced)" if r["forced_by"] else "") if r["enabled"] or r["forced_by"] else "off",
                    ago(r["since"], now) if r["state"] != "closed" else "-",
                    f"{r['failure_rate']:.0%} of {r['calls']}" if r["calls"] else "-",
                    ago(r["next_probe"], now) if r["next_probe"] else "-",
                    "yes" if r["holding"] else "no",
                ]
                for r in rows
            ],
        )
    )


async def _rows(session: Any) -> list[dict[str, Any]]:
    from sas.activities.services import AGENTS
    from sas.breaker.model import BreakerView
    from sas.breaker.rows import read_breakers, recent_windows
    from sas.task_models.queues import agent_queue

    settings = context.settings()
    now = datetime.now(UTC)
    views = await read_breakers(session)
    longest = max(settings.services.service(n).breaker.window_s for n in AGENTS)
    windows = await recent_windows(session, now - timedelta(seconds=2 * longest))
    rows = []
    for name in sorted(AGENTS):
        service = settings.services.service(name)
        view = views.get(name, BreakerView(service=name))
        calls, failures = windows.get(name, (0, 0))
        if view.state != "closed" and view.calls:
            calls, failures = view.calls, view.failures  # the window that opened it
        rows.append(
            {
                "service": name,
                # Where its Agents are planned now: its own queue, or the workflow's.
                "queue": agent_queue(settings.temporal.task_queue, name, service.own_queue)
                or settings.temporal.task_queue,
                "enabled": service.breaker.enabled,
                "state": view.state,
                "since": view.outage_since if view.state != "closed" else view.since,
                "state_since": view.since,
                "calls": calls,
                "failures": failures,
                "failure_rate": failures / calls if calls else 0.0,
                "next_probe": view.retry_at if view.state == "open" and not view.forced_by else None,
                "probe_by": view.probe_by if view.state == "half_open" else None,
                "forced_by": view.forced_by,
                "holding": view.holding(now),
                "hold_until": view.hold_until if view.state != "closed" and not view.forced_by else None,
                "last_error": view.last_error,
            }
        )
    return rows


def _force(service: str, state: str, by: str | None, reason: str, as_json: bool) -> None:
    from sas.activities.services import AGENTS
    from sas.cli import audit

    if service not in AGENTS:
        raise CliError(f"no service named {service!r}", f"use one of: {', '.join(sorted(AGENTS))}", code=2)
    if not reason.strip():
        raise CliError("--reason is required", "say why, for the audit log", code=2)
    who = audit.actor(by)

    async def act(session: Any) -> tuple[str, str]:
        from sas.breaker.rows import force

        return await force(session, service, state, who, reason, datetime.now(UTC))  # type: ignore[arg-type]

    before, after = context.run(lambda: context.with_session(act))
    if as_json:
        print_json({"service": service, "before": before, "after": after, "by": who, "reason": reason})
        return
    console.print(f"{shown(service)}: breaker {shown(before)} -> {shown(after)} (audited, by {shown(who)})")


@services_app.command("open")
def open_breaker(
    service: str = typer.Argument(..., help="inventory | payment | shipping"),
    reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
    by: str | None = typer.Option(None, "--by", help="Who (default: $USER)."),
    as_json: bool = JSON,
) -> None:
    """Force a breaker open: no call reaches the service and its steps wait, until `close`."""
    _force(service, "open", by, reason, as_json)


@services_app.command("close")
def close_breaker(
    service: str = typer.Argument(..., help="inventory | payment | shipping"),
    reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
    by: str | None = typer.Option(None, "--by", help="Who (default: $USER)."),
    as_json: bool = JSON,
) -> None:
    """Force a breaker closed: the service's held steps start now."""
    _force(service, "closed", by, reason, as_json)


@services_app.command("serve")
def serve(
    port: int = typer.Option(8081, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    ledger: Path = typer.Option(Path(".sas/ledger.db"), help="SQLite file of the ledger."),
    enable_faults: bool = typer.Option(False, "--enable-faults", help="Turn on the fault-injection admin API."),
) -> None:
    """Run the demo's remote services (inventory, payment, shipping), which the order example's Agents call."""
    from sas.runtime.demo_services import DemoServicesMissing, demo_services_module

    try:
        module = demo_services_module()
    except DemoServicesMissing as err:
        raise CliError(str(err), code=2) from None
    args = [sys.executable, "-m", module, "--host", host, "--port", str(port), "--ledger", str(ledger)]
    os.execv(sys.executable, args + (["--enable-faults"] if enable_faults else []))
