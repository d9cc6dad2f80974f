"""The Agents (one per remote service) and the Scheduler's mirror writes, as Temporal activities."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from pydantic_settings import SettingsError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from sas.activities.callbacks import CallbackActivities
from sas.activities.mirror import MirrorActivities
from sas.activities.outbound import WebhookSender
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.activities.services import AGENTS
from sas.settings import ServicesSettings, Settings
from sas.state_store.agent_writes import StepWriter, make_step_writer

if __name__ != "sas.activities":
    # This folder is installed as sas.activities (sas/activities links to it). Imported by its bare name, from
    # the repository root, it would be a second copy of every class in it, which Temporal's data
    # converter and isinstance checks would not recognise.
    raise ImportError(f"import sas.activities, not {__name__}: the activities/ folder is part of the sas package")


__all__ = ["MirrorActivities", "build_activities", "service_callers"]

# What build_activities takes for the remote services: one caller per service (service_callers),
# or one client that every service's caller shares (test rigs that bring their own client).
Remotes = Mapping[str, RemoteCaller] | httpx.AsyncClient


def check_service_names(services: ServicesSettings) -> None:
    """Refuse settings for a service no Agent calls: a misspelt name would otherwise be ignored."""
    unknown = sorted(set(services.named) - set(AGENTS))
    if unknown:
        # A SettingsError: the entry points report it as one line of bad settings (sas/runtime/entry.py).
        raise SettingsError(
            f"SAS_SERVICES__{unknown[0].upper()}__*: no Agent calls a service named {unknown[0]!r}"
            f" (known: {', '.join(sorted(AGENTS))})"
        )


@asynccontextmanager
async def service_callers(
    services: ServicesSettings, instrument: Callable[[httpx.AsyncClient], None] | None = None
) -> AsyncIterator[dict[str, RemoteCaller]]:
    """One caller per remote service, each over its own HTTP client (bulkheads), all closed on exit.

    ``instrument`` is given each client before use (tracing). Callbacks to submitters have a
    pool of their own as well (``WebhookSender``), never one of these."""
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
            callers[name] = RemoteCaller.for_service(client, service)
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
    (``state_store.agent_writes.make_step_writer``) and ``callback_sender`` to close their
    connections at shutdown; by default they are made from the settings."""
    if isinstance(remotes, httpx.AsyncClient):
        check_service_names(settings.services)
        shared = remotes
        remotes = {name: RemoteCaller.for_service(shared, settings.services.service(name)) for name in AGENTS}
    writer = step_writer or make_step_writer(settings.database)
    refused = RefusedWrites(sessions)
    agents = [agent(remotes[name], writer, identity, refused) for name, agent in AGENTS.items()]
    mirror = MirrorActivities(sessions, writer, settings, search_attributes)
    # Callbacks go out through their own checked, pinned pool, never the services' one.
    callbacks = CallbackActivities(callback_sender or WebhookSender(settings.outbound, settings.callbacks.secret))
    return [
        *(method for agent in agents for method in _activity_methods(agent)),
        mirror.accept,
        mirror.record,
        mirror.audit,
        callbacks.post,
    ]


def _activity_methods(agent: object) -> list[Callable[..., Any]]:
    """The bound activity methods of an Agent (its forward action and its undo)."""
    found = []
    for name in sorted(dir(type(agent))):
        if activity._Definition.from_callable(getattr(type(agent), name)) is not None:
            found.append(getattr(agent, name))
    return found
