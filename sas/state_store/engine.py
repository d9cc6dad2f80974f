"""One async engine per process, configured for the backend the URL names."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from sas.settings import DatabaseSettings


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, or None for other backends and in-memory databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def create_engine(db: DatabaseSettings) -> AsyncEngine:
    """Build the engine. SQLite gets WAL and immediate write transactions so that the
    worker, the Supervisor and the CLI can share one file without 'database is locked'."""
    path = sqlite_path(db.url)
    if path is not None:
        # No directory is made here: opening a state store never creates one (only `sas migrate`,
        # ``migrate.upgrade``, does). SQLite still creates a missing file in an existing directory,
        # so a read command checks that the file exists first (sas/cli/context.py).
        engine = create_async_engine(db.url, echo=db.echo, connect_args={"timeout": 30})
        _tune_sqlite(engine)
        return engine
    return create_async_engine(
        db.url,
        echo=db.echo,
        pool_size=db.pool_size,
        max_overflow=db.max_overflow,
        pool_timeout=db.pool_timeout_s,
        pool_pre_ping=True,
    )


def _tune_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        # Let SQLAlchemy, not the driver, decide when transactions begin (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # The busy timeout first: even `journal_mode=WAL` on a file already in WAL mode can meet
        # another connection's lock, and must wait for it rather than fail "database is locked".
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        if conn.get_execution_options().get(_READ_ONLY):
            # A reader in WAL mode reads its snapshot and never waits for a writer: an operator's
            # `sas list` answers at once while the worker writes (it waited up to the busy timeout
            # for the write lock, and failed "database is locked" when a writer held it longer).
            conn.exec_driver_sql("BEGIN")
            return
        # Take the write lock up front: a deferred transaction that later writes can
        # fail with SQLITE_BUSY without waiting for busy_timeout.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


_READ_ONLY = "sas_read_only"


def session_factory(engine: AsyncEngine, *, read_only: bool = False) -> async_sessionmaker[AsyncSession]:
    """Sessions on ``engine``. ``read_only`` sessions are for reads alone: on SQLite they take no
    write lock, so they never wait for a writer (a write in one may fail "database is locked")."""
    if read_only:
        return async_sessionmaker(engine.execution_options(**{_READ_ONLY: True}), expire_on_commit=False)
    return async_sessionmaker(engine, expire_on_commit=False)
