"""Each remote service's circuit breaker as every process reads it (``TaskClient.services``),
and an operator's hand on it: forced open or closed, audited (``TaskClient.force_breaker``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from sas.client.errors import InvalidInput
from sas.client.store import StateStore

if TYPE_CHECKING:
    from sas.settings import Settings


@dataclass(frozen=True)
class ServiceView:
    """One service of the registered task types: where its Agents are planned (``queue``),
    whether its breaker is ``enabled``, its ``state`` (closed, open, half_open) since when
    (``since``: an outage's start; ``state_since``: this state's), the calls and failures of
    the window that counts, the next probe, who forced it (``forced_by``), and whether its
    work is held now (``holding``, until ``hold_until``)."""

    service: str
    queue: str
    enabled: bool
    state: str
    since: datetime | None
    state_since: datetime | None
    calls: int
    failures: int
    failure_rate: float
    next_probe: datetime | None
    probe_by: str | None
    forced_by: str | None
    holding: bool
    hold_until: datetime | None
    last_error: str | None
    # The staged release of its held work under way since it closed, as a line; None: none.
    release: str | None = None

    @property
    def data(self) -> dict[str, Any]:
        """The service as ``sas services --json`` prints it."""
        return asdict(self)


@dataclass(frozen=True)
class BreakerChange:
    """An operator's forced transition of a service's breaker, as the audit log has it."""

    service: str
    before: str
    after: str
    by: str
    reason: str

    @property
    def data(self) -> dict[str, Any]:
        """The change as ``sas services open|close --json`` prints it."""
        return asdict(self)


def _names() -> list[str]:
    from sas.activities.services import AGENTS

    return sorted(AGENTS)


async def services(
    store: StateStore, settings: Settings, waiting: Callable[[str], Awaitable[int | None]] | None = None
) -> list[ServiceView]:
    """Every service's breaker and queue, by name. ``waiting``: how many calls wait in a queue
    (Temporal's backlog of it, None when it cannot say), asked of a service with its own queue
    only while its held work is being released, so that the release reads "40 of about 400"."""
    from sas.breaker.model import BreakerView
    from sas.breaker.rows import read_breakers, recent_windows
    from sas.breaker.settings import release_of
    from sas.task_models.queues import agent_queue

    names = _names()

    async def load(session: Any) -> list[tuple[ServiceView, BreakerView, bool]]:
        now = datetime.now(UTC)
        views = await read_breakers(session)
        longest = max((settings.services.service(n).breaker.window_s for n in names), default=0.0)
        windows = await recent_windows(session, now - timedelta(seconds=2 * longest))
        rows: list[tuple[ServiceView, BreakerView, bool]] = []
        for name in names:
            service = settings.services.service(name)
            view = views.get(name, BreakerView(service=name))
            calls, failures = windows.get(name, (0, 0))
            if view.state != "closed" and view.calls:
                calls, failures = view.calls, view.failures  # the window that opened it
            queue = settings.temporal.task_queue
            own = agent_queue(queue, name, service.own_queue)
            rows.append(
                (
                    ServiceView(
                        service=name,
                        # Where its Agents are planned now: its own queue, or the workflow's.
                        queue=own or queue,
                        enabled=service.breaker.enabled,
                        state=view.state,
                        since=view.outage_since if view.state != "closed" else view.since,
                        state_since=view.since,
                        calls=calls,
                        failures=failures,
                        failure_rate=failures / calls if calls else 0.0,
                        next_probe=view.retry_at if view.state == "open" and not view.forced_by else None,
                        probe_by=view.probe_by if view.state == "half_open" else None,
                        forced_by=view.forced_by,
                        holding=view.holding(now),
                        hold_until=view.hold_until if view.state != "closed" and not view.forced_by else None,
                        last_error=view.last_error,
                        release=release_of(service.breaker, view),
                    ),
                    view,
                    own is not None,
                )
            )
        return rows

    shown: list[ServiceView] = []
    for row, view, own_queue in await store.read(load):
        # A queue of its own holds only its calls; the workflow's holds every workflow task too.
        if row.release is not None and own_queue and waiting is not None:
            held = await waiting(row.queue)
            if held is not None:
                row = replace(row, release=release_of(settings.services.service(row.service).breaker, view, held))
        shown.append(row)
    return shown


def check_force(service: str, reason: str) -> None:
    """A known service, and a reason for the audit log."""
    names = _names()
    if service not in names:
        raise InvalidInput(f"no service named {service!r}", f"use one of: {', '.join(names)}", field="service")
    if not reason.strip():
        raise InvalidInput("--reason is required", "say why, for the audit log", field="reason")


async def force(
    store: StateStore, service: str, state: Literal["open", "closed"], by: str, reason: str
) -> BreakerChange:
    """Force ``service``'s breaker ``open`` (its work held until forced closed) or ``closed``;
    ``check_force`` has passed."""
    from sas.breaker.rows import force as forced

    async def act(session: Any) -> tuple[str, str]:
        return await forced(session, service, state, by, reason, datetime.now(UTC))

    before, after = await store.session(act)
    return BreakerChange(service, before, after, by, reason)
