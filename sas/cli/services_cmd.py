"""``sas services``: each remote service's circuit breaker and task queue, and the operator's
hand on the breaker (``sas services open|close NAME``, audited); ``sas services serve`` runs
the demo's remote services (``examples/demo_services``, found through its entry point)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

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
    rows = context.call(lambda tasks: tasks.services())
    if as_json:
        print_json([r.data for r in rows])
        return
    now = datetime.now(UTC)
    console.print(
        table(
            "remote services",
            ["service", "breaker", "since", "failures", "next probe", "holds"],
            [
                [
                    r.service,
                    (r.state + (" (forced)" if r.forced_by else "") if r.enabled or r.forced_by else "off")
                    + (f", {r.release}" if r.release else ""),
                    ago(r.since, now) if r.state != "closed" else "-",
                    f"{r.failure_rate:.0%} of {r.calls}" if r.calls else "-",
                    ago(r.next_probe, now) if r.next_probe else "-",
                    "yes" if r.holding else "no",
                ]
                for r in rows
            ],
        )
    )


def _force(service: str, state: Literal["open", "closed"], by: str | None, reason: str, as_json: bool) -> None:
    from sas.cli import audit

    who = audit.actor(by)  # --by as typed, refused before anything is asked (exit 2)
    # An unknown service or no reason is a usage error too.
    change = context.call(lambda tasks: tasks.force_breaker(service, state, by=who, reason=reason), usage=True)
    if as_json:
        print_json(change.data)
        return
    console.print(
        f"{shown(service)}: breaker {shown(change.before)} -> {shown(change.after)} (audited, by {shown(change.by)})"
    )


@services_app.command("open")
def open_breaker(
    service: str = typer.Argument(
        ..., help="The service's name (sas services lists them): payment; a team's, north.flights."
    ),
    reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
    by: str | None = typer.Option(None, "--by", help="Who (default: $USER)."),
    as_json: bool = JSON,
) -> None:
    """Force a breaker open: no call reaches the service and its steps wait, until `close`."""
    _force(service, "open", by, reason, as_json)


@services_app.command("close")
def close_breaker(
    service: str = typer.Argument(
        ..., help="The service's name (sas services lists them): payment; a team's, north.flights."
    ),
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
