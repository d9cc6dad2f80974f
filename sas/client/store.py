"""The client's way into the state store: a session on the store the settings name, opened for
one piece of work and closed after it. The client never creates a store (no SQLite file, no
tables): only ``sas migrate`` and the stack's processes do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sas.client.errors import Unreachable

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sas.settings import Settings

T = TypeVar("T")


def no_state_store(where: str) -> Unreachable:
    """There is no sas state store where the settings point."""
    return Unreachable(
        f"no sas state store at {where}: start one here with `sas up`, or point at one"
        " (`. .sas/env` where `sas up` runs, or SAS_DATABASE__URL)"
    )


class StateStore:
    """Sessions on the state store of ``settings``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def require(self) -> None:
        """Say so when the store the settings name does not exist (checked before Temporal is asked)."""
        from sas.state_store.engine import sqlite_path

        path = sqlite_path(self.settings.database.url)
        if path is not None and not path.is_file():
            raise no_state_store(str(path))

    def engine(self) -> AsyncEngine:
        from sas import state_store

        self.require()
        return state_store.create_engine(self.settings.database)

    async def read(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """``fn`` with a read-only session: it never waits for the stack's writers."""
        return await self.session(fn, read_only=True)

    async def session(self, fn: Callable[[Any], Awaitable[T]], *, read_only: bool = False) -> T:
        """Run ``fn`` with a session. A database that cannot be reached raises
        StateStoreUnreachable (the URL without its password); one without sas's tables says
        there is no state store there."""

        async def one(sessions: Any) -> T:
            async with sessions() as session:
                return await fn(session)

        return await self.sessions(one, read_only=read_only)

    async def sessions(self, fn: Callable[[Any], Awaitable[T]], *, read_only: bool = False) -> T:
        """Run ``fn`` with a session factory, for work that opens a session of its own for each
        part (reconciling: one task's read, its repairs, its alerts); errors as ``session``'s."""
        from sas import state_store
        from sas.runtime.failures import StateStoreUnreachable, mask_url, missing_tables, reaching_state_store

        url = self.settings.database.url
        engine = self.engine()
        try:
            with reaching_state_store(url):
                return await fn(state_store.session_factory(engine, read_only=read_only))
        except StateStoreUnreachable as err:
            if missing_tables(err):
                raise no_state_store(mask_url(url)) from None
            raise
        finally:
            await engine.dispose()
