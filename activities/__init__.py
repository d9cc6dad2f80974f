"""The Agents (one per remote service) and the Scheduler's mirror writes, as Temporal activities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from activities.callbacks import CallbackActivities
from activities.mirror import MirrorActivities
from activities.outbound import WebhookSender
from activities.refused_writes import RefusedWrites
from activities.remote import RemoteCaller
from activities.services import InventoryAgent, PaymentAgent, ShippingAgent
from settings import Settings
from state_store.agent_writes import StepWriter, make_step_writer

__all__ = ["MirrorActivities", "build_activities"]


def build_activities(
    settings: Settings,
    http: httpx.AsyncClient,
    sessions: async_sessionmaker[AsyncSession],
    identity: str,
    search_attributes: bool = True,
    step_writer: StepWriter | None = None,
    callback_sender: WebhookSender | None = None,
) -> list[Callable[..., Any]]:
    """Every activity the task worker registers, with its dependencies injected.

    Give ``step_writer`` (``state_store.agent_writes.make_step_writer``) and ``callback_sender``
    to close their connections at shutdown; by default they are made from the settings."""
    remote = RemoteCaller(http, settings.services.url)
    writer = step_writer or make_step_writer(settings.database)
    refused = RefusedWrites(sessions)
    inventory = InventoryAgent(remote, writer, identity, refused)
    payment = PaymentAgent(remote, writer, identity, refused)
    shipping = ShippingAgent(remote, writer, identity, refused)
    mirror = MirrorActivities(sessions, writer, settings, search_attributes)
    # Callbacks go out through their own checked, pinned pool, never the services' one.
    callbacks = CallbackActivities(callback_sender or WebhookSender(settings.outbound, settings.callbacks.secret))
    return [
        inventory.reserve,
        inventory.release,
        payment.charge,
        payment.refund,
        shipping.ship,
        shipping.cancel,
        mirror.accept,
        mirror.record,
        mirror.audit,
        callbacks.post,
    ]
