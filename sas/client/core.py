"""What every part of ``TaskClient`` stands on: its settings, its lazy Temporal client, its state
store, who acts, and ``typed``, which makes an unreachable dependency a ``ClientError``.

``TaskClient`` (``sas.client.task_client``) is one class made of parts by concern: starting and
operator actions there, the reads (``read_calls``), the schedules (``schedule_calls``), the
stack's upkeep (``upkeep_calls``); each part's methods delegate to a module of their own.

Its lifetime is here too: ``close`` (and ``async with``), and ``run_driver``, which ends a
program that used it with its own exit code, never the abort of temporalio's Rust bridge at
interpreter exit."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

from sas.client import audit
from sas.client.errors import Unreachable
from sas.client.store import StateStore

if TYPE_CHECKING:
    from typing import Self

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


_CLOSED = "this TaskClient is closed"
_OPEN_ANOTHER = "open another with TaskClient.connect()"


class ClientCore:
    """The state every part of ``TaskClient`` shares (see ``TaskClient`` for how to build one).

    A client is an async context manager: ``async with await TaskClient.connect() as client:``
    closes it at the block's end (``close``)."""

    def __init__(self, client: Client | None, settings: Settings | None = None, *, actor: str | None = None) -> None:
        if settings is None:
            from sas.settings import get_settings

            settings = get_settings()
        self._client, self.settings = client, settings
        # A Temporal client given to it stays its giver's; the one it connects is its own to drop.
        self._owns_connection = client is None
        self._closed = False
        self.store = StateStore(settings)
        self.actor = audit.check_actor(actor) if actor is not None else None

    async def __aenter__(self) -> Self:
        if self._closed:
            raise Unreachable(_CLOSED, _OPEN_ANOTHER)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Let go of the Temporal connection this client made; a later call raises ``Unreachable``.

        Closing twice is harmless. A Temporal client given to it (``TaskClient(client, ...)``)
        is left open: it is its giver's. The state store needs nothing closed (each call opens
        and disposes its own connections). A process that is done should end through
        ``run_driver``: closing does not stop temporalio's Rust threads, which can abort the
        interpreter's own shutdown."""
        self._closed = True
        if self._owns_connection:
            self._client = None

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    @property
    def temporal(self) -> Client:
        """The Temporal client (of a lazy client, once a call has connected it)."""
        if self._closed:
            raise Unreachable(_CLOSED, _OPEN_ANOTHER)
        if self._client is None:
            raise Unreachable("not connected to Temporal yet", "build the client with TaskClient.connect()")
        return self._client

    async def _temporal(self) -> Client:
        if self._closed:
            raise Unreachable(_CLOSED, _OPEN_ANOTHER)
        if self._client is None:
            from sas.runtime.connect import connect

            self._client = await connect(self.settings.temporal, encryption=self.settings.encryption)
        return self._client

    def _who(self, by: str | None, reason: str) -> str:
        audit.check_reason(reason)
        return audit.check_actor(by or self.actor)


def run_driver(main: Callable[[], Coroutine[Any, Any, object]]) -> NoReturn:
    """Run a program's async ``main`` and end the process with its exit code, as ``sas`` does.

    0 when ``main`` returns, the code of a ``SystemExit`` it raises (``sys.exit(3)``), 130 on
    Ctrl-C, and 1 with the traceback on stderr for any other exception. Output is flushed, then
    the process ends without the interpreter's shutdown: temporalio's Rust bridge can abort that
    shutdown once a client has connected (``Fatal Python error: PyGILState_Release``, exit 134;
    temporalio/sdk-python#300), so a driver that printed its result would still fail now and
    then. Call it last, in place of ``asyncio.run(main())``; nothing after it runs, ``atexit``
    handlers included.

    ```python
    from sas.api.client import TaskClient, run_driver


    async def main() -> None:
        async with await TaskClient.connect(actor="billing-job") as client:
            print((await client.submit(task_type, task_input)).task_id)


    run_driver(main)
    ```"""
    import asyncio
    import traceback

    from sas.runtime.entry import exit_hard

    code = 0
    try:
        asyncio.run(main())
    except SystemExit as err:
        code = _exit_code(err)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - whatever ended main, the process ends with a code, not an abort
        traceback.print_exc()
        code = 1
    exit_hard(code)
    raise SystemExit(code)  # exit_hard has ended the process; this only tells the type checker so


def _exit_code(err: SystemExit) -> int:
    """The exit code ``sys.exit`` meant: None is 0, an int itself, anything else printed and 1."""
    import sys

    if err.code is None or isinstance(err.code, int):
        return err.code or 0
    print(err.code, file=sys.stderr)
    return 1
