"""``sas health worker|supervisor``: is the worker (or Supervisor) on *this host* polling?

A container healthcheck: it passes only if Temporal has seen a process of this host with the
role's identity poll its task queue recently (and, for the Supervisor, every shard's workflow
running and sweeping), through ``TaskClient.health``, which says how it is judged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import typer

from sas.cli import context
from sas.cli.output import CliError, console, shown

# sas.client.health.DEFAULT_MAX_AGE_S, written out so that `--help` loads none of the client.
DEFAULT_MAX_AGE_S = 90.0


class Role(StrEnum):
    worker = "worker"
    supervisor = "supervisor"


def register(app: typer.Typer) -> None:
    app.command("health")(health)


def health(
    role: Role = typer.Argument(..., help="Which process of this host to check."),
    max_age_s: float = typer.Option(DEFAULT_MAX_AGE_S, help="Unhealthy if its last poll is older than this."),
    max_sweep_age_s: float | None = typer.Option(
        None,
        min=0.001,
        help="supervisor: unhealthy if a shard has not swept for this long (default: SAS_SUPERVISOR__SWEEP_BOUND_S).",
    ),
) -> None:
    """Exit 0 if the worker or Supervisor on this host polls its task queue (for healthchecks); for
    the Supervisor, also only if every shard's Supervisor workflow runs and has swept within its bound."""
    from sas.runtime.entry import describe_settings_error, settings_errors
    from sas.settings import get_settings

    try:
        get_settings()
    except settings_errors() as err:
        # describe_settings_error names the variables, never their values.
        raise CliError(f"invalid settings:\n{describe_settings_error(err)}", code=2) from None
    which: Literal["worker", "supervisor"] = "worker" if role is Role.worker else "supervisor"
    found = context.call(lambda client: client.health(which, max_age_s=max_age_s, max_sweep_age_s=max_sweep_age_s))
    # A poller's identity is whatever that client called itself: outside text.
    console.print(
        f"healthy: {shown(found.poller.identity)} polls {shown(repr(found.queue))}"
        f" (last poll {found.poller.age_s:.0f}s ago)"
    )
