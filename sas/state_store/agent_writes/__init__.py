"""Where an Agent's rows are written: the hot-path writes, on the database driver directly - a
task's acceptance (the task row and its Pending step rows) and the Agents' own writes, Processing
when an attempt starts and Processed when it succeeds, each attempt kept in ``step_attempts``.

They are three-quarters of the mirror's work: eight writes per order. Through an ORM session
each cost about 4 ms of CPU and, on SQLite, contended with the Agents' connection for the
file's write lock; as plain statements on one kept-open connection, well under 1 ms
(bench/write_cost.py, docs/benchmarks.md). This package owns only the connections, the
batching and the transactions: the statements are the one writer's (``sas.state_store.mirror_rules``),
compiled once for the driver (``statements``), so these writes follow the same rules as every
other write of ``tasks`` and ``steps``. ``writer`` says what every writer offers;
``sqlite_writer`` and ``postgres_writer`` are the two.
"""

from __future__ import annotations

from sas.settings import DatabaseSettings
from sas.state_store.agent_writes.postgres_writer import PostgresStepWriter
from sas.state_store.agent_writes.sqlite_writer import SqliteStepWriter
from sas.state_store.agent_writes.writer import StepWriter
from sas.state_store.engine import sqlite_path


def make_step_writer(db: DatabaseSettings) -> StepWriter:
    """The Agents' writer of the state store ``db`` names: SQLite's or PostgreSQL's."""
    path = sqlite_path(db.url)
    return SqliteStepWriter(str(path)) if path is not None else PostgresStepWriter(db)
