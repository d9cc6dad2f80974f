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

    def __init__(
        self,
        client: Client | None,
        settings: Settings | None = None,
        *,
        actor: str | None = None,
        team: str | None = None,
    ) -> None:
        if settings is None:
            from sas.settings import get_settings

            settings = get_settings()
        self._client, self.settings = client, settings
        # A Temporal client given to it stays its giver's; the one it connects is its own to drop.
        self._owns_connection = client is None
        self._closed = False
        self.store = StateStore(settings)
        self.actor = audit.check_actor(actor) if actor is not None else None
        # Whom it acts for: one team's tasks only, or (None) every team's.
        self.team = _check_team(team) if team is not None else settings.operator.team

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
        """Who acts, as the audit log keeps it: for a client of one team, ``<who> (team <team>)``."""
        audit.check_reason(reason)
        who = audit.check_actor(by or self.actor)
        if self.team is None:
            return who
        suffix = f" (team {self.team})"
        return who[: audit.MAX_BY - len(suffix)] + suffix

    async def _acting_on(self, task_id: str, by: str | None, reason: str) -> str:
        """Who acts on ``task_id`` (``_who``), once a client of one team has found the task its
        team's (``OutsideTeam`` if not, before anything is sent)."""
        who = self._who(by, reason)
        await self._in_team(task_id)
        return who

    async def _in_team(self, task_id: str) -> None:
        """``OutsideTeam`` when a client of one team is asked about another team's task."""
        if self.team is not None:
            from sas.client.teams import check_team_of_task

            await check_team_of_task(self.team, self.store, self._temporal, task_id)

    def _read_team(self, team: str | None) -> str | None:
        """The team a list is limited to: the one asked, or a client of one team's own (which
        may not ask for another's)."""
        if self.team is None or team in (None, self.team):
            return team or self.team
        from sas.client.errors import OutsideTeam

        raise OutsideTeam(
            f"--team {team}: this client acts for team {self.team} only",
            "it was made for one team (SAS_OPERATOR__TEAM, or TaskClient(team=...))",
        )

    def _for_team(self, task_type: str) -> None:
        """``OutsideTeam`` when a client of one team is asked to start another team's type."""
        if self.team is not None:
            from sas.client.teams import check_team_of_type

            check_team_of_type(self.team, task_type)


def _check_team(team: str) -> str:
    from sas.client.errors import InvalidInput
    from sas.task_models.ids import NAME

    if not NAME.fullmatch(team):
        raise InvalidInput(f"team {team!r}: a team is 1-40 characters from a-z 0-9 _", field="team")
    return team


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
