"""The Agents (one set per remote service of the registered task types) and the Scheduler's
mirror writes, as Temporal activities."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from pydantic_settings import SettingsError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.activities.callbacks import CallbackActivities
from sas.activities.cleanup_plans import CleanupPlans
from sas.activities.mirror import MirrorActivities
from sas.activities.outbound import WebhookSender
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.activities.services import AGENTS
from sas.breaker.service import Breakers
from sas.settings import ServicesSettings, Settings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.agent_writes.writer import StepWriter
from sas.task_models.ids import service_settings, step_settings
from sas.task_models.queues import service_of, service_queue
from sas.task_models.sdk_internals import activity_name_of
from sas.task_types.discovery import discover

if __name__ != "sas.activities":
    # This folder is installed as sas.activities (sas/activities links to it). Imported by its bare name, from
    # the repository root, it would be a second copy of every class in it, which Temporal's data
    # converter and isinstance checks would not recognise.
    raise ImportError(f"import sas.activities, not {__name__}: the activities/ folder is part of the sas package")


__all__ = [
    "Breakers",
    "MirrorActivities",
    "build_activities",
    "by_service",
    "check_step_settings",
    "service_breakers",
    "service_callers",
]

# What build_activities takes for the remote services: one caller per service (service_callers),
# or one client that every service's caller shares (test rigs that bring their own client).
Remotes = Mapping[str, RemoteCaller] | httpx.AsyncClient


def check_service_names(services: ServicesSettings, queues: list[str] | None = None) -> None:
    """Refuse settings for a service no Agent calls: a misspelt name would otherwise be ignored.
    ``queues`` (``SAS_WORKER__QUEUES``) may name only 'workflows' and the Agents' services."""
    wrong = sorted(set(queues or ()) - {"workflows", *AGENTS})
    if wrong:
        raise SettingsError(
            f"SAS_WORKER__QUEUES: no Agent calls a service named {wrong[0]!r}"
            f" (use 'workflows' or: {', '.join(sorted(AGENTS))})"
        )
    unknown = sorted(set(services.named) - set(AGENTS))
    if unknown:
        # A SettingsError: the entry points report it as one line of bad settings (sas/runtime/entry.py).
        raise SettingsError(
            f"{service_settings(unknown[0])}__*: no Agent calls a service named {unknown[0]!r}"
            f" (known: {', '.join(sorted(AGENTS))})"
        )


def check_step_settings(settings: Settings) -> None:
    """Refuse ``SAS_STEPS__<TYPE>__<STEP>__*`` for a step no registered task type has: a misspelt
    type or step would otherwise be ignored and the step run with another policy."""
    types = discover(tuple(settings.task_types.modules), only=tuple(settings.task_types.run)).types
    for key in sorted(settings.steps):
        task_type, dot, step = key.rpartition(".")
        if not dot:
            continue  # SAS_STEPS__<STEP>__*: every step of that name, whichever types have one
        found = types.get(task_type)
        if found is None:
            raise SettingsError(
                f"{step_settings(task_type, step)}__*: no task type is named {task_type!r}"
                f" (registered: {', '.join(sorted(types)) or 'none'}; a team's type's steps are set under"
                " SAS_TEAMS__<TEAM>__STEPS__<TYPE>__<STEP>__*)"
            )
        names = [s.name for s in found.definition.steps]
        if step not in names:
            raise SettingsError(
                f"{step_settings(task_type, step)}__*: task type {task_type!r} has no step"
                f" {step!r} (its steps: {', '.join(names)})"
            )


def service_breakers(
    services: ServicesSettings,
    worker: str,
    sessions: async_sessionmaker[AsyncSession] | None,
    meter: Any = None,
) -> Breakers:
    """This worker's circuit breaker of every remote service (``sas/breaker/service.py``), shared
    with the other workers through the state store. ``async with`` it to keep it in step."""
    check_service_names(services)
    resolved = {name: services.service(name) for name in AGENTS}
    return Breakers(
        {name: s.breaker for name, s in resolved.items()},
        worker,
        sessions,
        meter,
        # A probe's worker has until its call could have timed out to report.
        probe_for_s={name: s.timeout_s for name, s in resolved.items()},
    )


@asynccontextmanager
async def service_callers(
    services: ServicesSettings,
    instrument: Callable[[httpx.AsyncClient], None] | None = None,
    breakers: Breakers | None = None,
    workflow_queue: str | None = None,
) -> AsyncIterator[dict[str, RemoteCaller]]:
    """One caller per remote service, each over its own HTTP client (bulkheads), all closed on exit.

    ``instrument`` is given each client before use (tracing). Callbacks to submitters have a
    pool of their own as well (``WebhookSender``), never one of these. With ``breakers``, each
    caller sends nothing while its service's breaker holds. With ``workflow_queue`` (the
    worker's), a call served outside its service's own queue that finds every slot of the
    service busy is refused, to wait in that queue instead (``task_models/queues.py``)."""
    check_service_names(services)
    async with AsyncExitStack() as clients:
        callers: dict[str, RemoteCaller] = {}
        for name in AGENTS:
            service = services.service(name)
            pool = service.max_connections
            limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
            client = await clients.enter_async_context(httpx.AsyncClient(limits=limits))
            if instrument is not None:
                instrument(client)
            own_queue = service_queue(workflow_queue, name) if workflow_queue is not None else None
            callers[name] = RemoteCaller.for_service(client, service, breakers[name] if breakers else None, own_queue)
        yield callers


def build_activities(
    settings: Settings,
    remotes: Remotes,
    sessions: async_sessionmaker[AsyncSession],
    identity: str,
    search_attributes: bool = True,
    step_writer: StepWriter | None = None,
    callback_sender: WebhookSender | None = None,
) -> list[Callable[..., Any]]:
    """Every activity the task worker registers, with its dependencies injected.

    ``remotes``: the callers from ``service_callers`` (one pool per service), or one client that
    all services then share (each still with its own concurrency limit). Give ``step_writer``
    (``sas.state_store.agent_writes.make_step_writer``) and ``callback_sender`` to close their
    connections at shutdown; by default they are made from the settings."""
    if isinstance(remotes, httpx.AsyncClient):
        check_service_names(settings.services)
        shared = remotes
        remotes = {name: RemoteCaller.for_service(shared, settings.services.service(name)) for name in AGENTS}
    writer = step_writer or make_step_writer(settings.database)
    refused = RefusedWrites(sessions)
    agents = [fn for name, service in AGENTS.items() for fn in service.build(remotes[name], writer, identity, refused)]
    mirror = MirrorActivities(sessions, writer, settings, search_attributes)
    # Callbacks go out through their own checked, pinned pool, never the services' one.
    callbacks = CallbackActivities(callback_sender or WebhookSender(settings.outbound, settings.callbacks.secret))
    return [
        *agents,
        mirror.accept,
        mirror.record,
        mirror.audit,
        CleanupPlans(sessions, settings).plan,
        callbacks.post,
    ]


def by_service(activities: list[Callable[..., Any]]) -> dict[str, list[Callable[..., Any]]]:
    """The Agents among ``activities``, by the remote service they call: what each service's
    own task queue runs, when it has one (``task_models/queues.py``)."""
    grouped: dict[str, list[Callable[..., Any]]] = {name: [] for name in AGENTS}
    for fn in activities:
        name = activity_name_of(fn)
        if name is None or "." not in name:
            continue
        service = service_of(name)
        if service in grouped:
            grouped[service].append(fn)
    return grouped
