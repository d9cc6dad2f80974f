"""What every ``sas`` command needs from its surroundings: the settings, a Temporal client, a
state-store session, and a way to run async code that turns an unreachable dependency into one
clear line. Commands import this module, never each other (no import cycles in the CLI)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from sas.cli.output import CliError

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.settings import Settings

T = TypeVar("T")

# `sas --debug`: print the traceback of a failure as well as its one line.
DEBUG = False


def settings() -> Settings:
    """The settings, or a CliError naming each bad SAS_* variable."""
    from sas.runtime.entry import SETTINGS_ERRORS, describe_settings_error
    from sas.settings import get_settings

    try:
        return get_settings()
    except SETTINGS_ERRORS as err:
        raise CliError(
            f"invalid settings:\n{describe_settings_error(err)}", "fix the SAS_* environment variables or .env", code=2
        ) from None


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's async part. An unreachable dependency raises DependencyUnreachable, which
    ``main`` prints as one line."""
    return asyncio.run(make())


async def client() -> Client:
    from sas.runtime.connect import connect

    loaded = settings()
    return await connect(loaded.temporal, encryption=loaded.encryption)


async def with_client(fn: Callable[[Client], Awaitable[T]]) -> T:
    return await fn(await client())


async def with_session(fn: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``fn`` with a state-store session; a database that cannot be reached or read (no
    tables yet) raises StateStoreUnreachable, naming the URL without its password."""
    from sas import state_store
    from sas.runtime.failures import reaching_state_store

    loaded = settings()
    engine = state_store.create_engine(loaded.database)
    try:
        with reaching_state_store(loaded.database.url):
            async with state_store.session_factory(engine)() as session:
                return await fn(session)
    finally:
        await engine.dispose()
