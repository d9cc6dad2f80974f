"""The Agents (one per remote service) and the Scheduler's mirror writes, as Temporal activities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from activities.callbacks import CallbackActivities
from activities.mirror import MirrorActivities
from activities.remote import RemoteCaller
from activities.services import InventoryAgent, PaymentAgent, ShippingAgent
from settings import Settings

__all__ = ["MirrorActivities", "build_activities"]


def build_activities(
    settings: Settings,
    http: httpx.AsyncClient,
    sessions: async_sessionmaker[AsyncSession],
    identity: str,
    search_attributes: bool = True,
    callback_secret: bytes | None = None,
) -> list[Callable[..., Any]]:
    """Every activity the task worker registers, with its dependencies injected."""
    remote = RemoteCaller(http, settings.services.url)
    inventory = InventoryAgent(remote, sessions, identity)
    payment = PaymentAgent(remote, sessions, identity)
    shipping = ShippingAgent(remote, sessions, identity)
    mirror = MirrorActivities(sessions, settings, search_attributes)
    callbacks = CallbackActivities(http, callback_secret)
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
