"""What every ``sas`` command needs from its surroundings: the settings, a Temporal client, a
state-store session, and a way to run async code that turns an unreachable dependency into one
clear line. Commands import this module, never each other (no import cycles in the CLI)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from sas.cli.output import CliError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
    from temporalio.client import Client

    from sas.client.task_client import TaskClient
    from sas.settings import Settings

T = TypeVar("T")

# `sas --debug`: print the traceback of a failure as well as its one line.
DEBUG = False


def settings() -> Settings:
    """The settings, or a CliError naming each bad SAS_* variable."""
    from sas.runtime.entry import describe_settings_error, settings_errors
    from sas.settings import get_settings

    try:
        return get_settings()
    except settings_errors() as err:
        raise CliError(
            f"invalid settings:\n{describe_settings_error(err)}", "fix the SAS_* environment variables or .env", code=2
        ) from None


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's async part. An unreachable dependency raises DependencyUnreachable, which
    ``main`` prints as one line."""
    import asyncio

    return asyncio.run(make())


async def client() -> Client:
    from sas.runtime.connect import connect

    loaded = settings()
    return await connect(loaded.temporal, encryption=loaded.encryption)


async def with_client(fn: Callable[[Client], Awaitable[T]]) -> T:
    return await fn(await client())


def require_state_store(loaded: Settings) -> None:
    """Say so, in one line, when the state store the settings name does not exist: a command
    that needs one checks first, before it asks Temporal anything."""
    from sas.client.store import StateStore

    StateStore(loaded).require()


def open_engine(loaded: Settings) -> AsyncEngine:
    """An engine on the existing state store. A command never creates one (no SQLite file, no
    directory): only `sas migrate` and the stack's processes do."""
    from sas.client.store import StateStore

    return StateStore(loaded).engine()


async def with_read_session(fn: Callable[[Any], Awaitable[T]]) -> T:
    """``with_session`` for a command that only reads: it never waits for the stack's writers."""
    return await with_session(fn, read_only=True)


async def with_session(fn: Callable[[Any], Awaitable[T]], *, read_only: bool = False) -> T:
    """Run ``fn`` with a state-store session (``sas.client.store``): a database that cannot be
    reached raises StateStoreUnreachable, one without sas's tables says there is no state store."""
    from sas.client.store import StateStore

    return await StateStore(settings()).session(fn, read_only=read_only)


async def task_client() -> TaskClient:
    """The task client every operator command goes through (``sas.client``)."""
    from sas.client.task_client import TaskClient

    return TaskClient(await client(), settings())


def call(work: Callable[[TaskClient], Awaitable[T]], *, usage: bool = False) -> T:
    """A command's one call of the task client, which connects to Temporal only if the call
    needs it: a command that reads the state store works while Temporal is away. Its typed
    errors are printed by ``main`` as one line, exit 1; with ``usage``, a value it refuses
    (``InvalidInput``) is a usage error, exit 2, as a bad flag is."""
    from sas.client.errors import InvalidInput
    from sas.client.task_client import TaskClient

    tasks = TaskClient(None, settings())

    async def go() -> T:
        return await work(tasks)

    try:
        return run(go)
    except InvalidInput as err:
        if not usage:
            raise
        raise CliError(err.message, err.hint, code=2) from None
