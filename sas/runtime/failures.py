"""A dependency that cannot be reached or refuses us (Temporal, the state store) becomes one
typed error with one line to show: what, where (database URLs without their password) and why.
Entry points print that line; the traceback only when asked for (``sas --debug``)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


class DependencyUnreachable(ConnectionError):
    """Something sas needs cannot be reached, or turned us away. ``str()`` is the line to show."""

    hint = ""


class TemporalUnreachable(DependencyUnreachable):
    """No client could be built: the frontend is down or not at the address, or refused the
    TLS settings or API key. temporalio reports these as a bare RuntimeError from its bridge."""

    hint = (
        "start it with `sas up` (or `sas demo`), or point SAS_TEMPORAL__ADDRESS (and its TLS or API key "
        "settings) at your cluster; --debug shows the client's own error"
    )

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach Temporal at {address}")
        self.address = address
        self.detail = detail  # the SDK's bridge error: long, for --debug


class StateStoreUnreachable(DependencyUnreachable):
    """The state store's database cannot be reached, or refused the credentials or the database name."""

    hint = "check SAS_DATABASE__URL, and that the database server is up (`sas migrate` creates the tables)"

    def __init__(self, url: str, cause: BaseException) -> None:
        super().__init__(f"cannot use the state store at {mask_url(url)}: {reason(cause)}")
        self.url = mask_url(url)


class MissingExtra(RuntimeError):
    """A setting asks for something an optional extra provides, and it is not installed.
    ``str()`` is the line to show: what asked for it, and the pip command that installs it."""

    def __init__(self, extra: str, why: str, cause: ImportError) -> None:
        super().__init__(
            f"{why}, but the {extra} extra is not installed (no module {cause.name}): pip install 'sas[{extra}]'"
        )
        self.extra = extra


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***: what may be printed or logged."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(a database URL that cannot be parsed)"


def reason(err: BaseException) -> str:
    """Why, in a few words: from the innermost cause, which names the driver's own error."""
    while (err.__cause__ or err.__context__) is not None and not isinstance(err, (OSError, TimeoutError)):
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return "unknown host"
    if isinstance(err, TimeoutError):
        return "timed out"
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    # SQLAlchemy prefixes the driver's class: "(sqlalchemy.dialects...Error) role x does not exist".
    if text.startswith("(") and ") " in text:
        text = text.split(") ", 1)[1]
    return text


def _state_store_errors() -> tuple[type[BaseException], ...]:
    from sqlalchemy.exc import DBAPIError

    errors: tuple[type[BaseException], ...] = (DBAPIError, OSError, TimeoutError)
    try:
        import asyncpg

        errors += (asyncpg.PostgresError, asyncpg.InterfaceError)
    except ImportError:  # SQLite only
        pass
    return errors


def missing_tables(err: BaseException) -> bool:
    """Whether the database was reached but has no sas tables (never migrated: not a state store)."""
    seen: BaseException | None = err
    for _ in range(10):  # the chain of causes, bounded
        if seen is None:
            return False
        text = str(seen)
        if "no such table" in text or "UndefinedTableError" in text or type(seen).__name__ == "UndefinedTableError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextmanager
def reaching_state_store(url: str) -> Iterator[None]:
    """Turn the database's connection and login failures inside the block into StateStoreUnreachable."""
    try:
        yield
    except _state_store_errors() as err:
        raise StateStoreUnreachable(url, err) from err
