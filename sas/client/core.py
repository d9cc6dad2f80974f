"""What every part of ``TaskClient`` stands on: its settings, its lazy Temporal client, its state
store, who acts, and ``typed``, which makes an unreachable dependency a ``ClientError``.

``TaskClient`` (``sas.client.task_client``) is one class made of parts by concern: starting and
operator actions there, the reads (``read_calls``), the schedules (``schedule_calls``), the
stack's upkeep (``upkeep_calls``); each part's methods delegate to a module of their own."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from sas.client import audit
from sas.client.errors import Unreachable
from sas.client.store import StateStore

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.settings import Settings

P = ParamSpec("P")
T = TypeVar("T")


def typed(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Temporal or the state store out of reach becomes ``Unreachable``, like every other
    failure a caller can act on a ``ClientError``."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        from sas.runtime.failures import DependencyUnreachable

        try:
            return await fn(*args, **kwargs)
        except DependencyUnreachable as err:
            raise Unreachable(str(err), err.hint or None) from err

    return wrapper


class ClientCore:
    """The state every part of ``TaskClient`` shares (see ``TaskClient`` for how to build one)."""

    def __init__(self, client: Client | None, settings: Settings | None = None, *, actor: str | None = None) -> None:
        if settings is None:
            from sas.settings import get_settings

            settings = get_settings()
        self._client, self.settings = client, settings
        self.store = StateStore(settings)
        self.actor = audit.check_actor(actor) if actor is not None else None

    @property
    def temporal(self) -> Client:
        """The Temporal client (of a lazy client, once a call has connected it)."""
        if self._client is None:
            raise Unreachable("not connected to Temporal yet", "build the client with TaskClient.connect()")
        return self._client

    async def _temporal(self) -> Client:
        if self._client is None:
            from sas.runtime.connect import connect

            self._client = await connect(self.settings.temporal, encryption=self.settings.encryption)
        return self._client

    def _who(self, by: str | None, reason: str) -> str:
        audit.check_reason(reason)
        return audit.check_actor(by or self.actor)
