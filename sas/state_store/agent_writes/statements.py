"""The one writer's statements (``sas.state_store.mirror_rules``), compiled once for the hot
path's drivers: sqlite3 and asyncpg."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect

from sas.state_store import mirror_rules as rules
from sas.state_store.tables import UTCDateTime
from sas.task_models import TaskAccepted


class Compiled:
    """A statement compiled for one driver: its SQL, and its parameters in the order it binds them."""

    def __init__(self, statement: Any, backend: str) -> None:
        dialect = sqlite_dialect(paramstyle="qmark") if backend == "sqlite" else asyncpg_dialect()
        compiled = statement.compile(dialect=dialect)
        self.sql: str = compiled.string
        positions = tuple(compiled.positiontup or ())
        fixed = [name for name in positions if not name.startswith(rules.PARAM_PREFIX)]
        assert not fixed, f"a hot-path statement binds only named parameters, not {fixed}"
        names = [name.removeprefix(rules.PARAM_PREFIX) for name in positions]
        self.args: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            itemgetter(*names) if len(names) > 1 else lambda params: (params[names[0]],)
        )
        # What a session's type processors would convert: JSON to text, and on SQLite datetimes.
        self.converted: dict[str, Callable[[Any], Any]] = {}
        for position, name in zip(positions, names, strict=True):
            kind = compiled.binds[position].type
            if isinstance(kind, JSON):
                self.converted[name] = _as_json
            elif backend == "sqlite" and isinstance(kind, UTCDateTime):
                self.converted[name] = _as_text

    def many(self, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        return [self.args(row) for row in rows]


class HotPath:
    """The statements the hot path runs, compiled for one backend (``sqlite`` or ``postgresql``)."""

    def __init__(self, backend: str) -> None:
        self.step = Compiled(rules.STEP_WRITE, backend)
        self.task = Compiled(rules.TASK_WRITE, backend)
        self.attempt = Compiled(rules.ATTEMPT_INSERT[backend], backend)
        self.new_task = Compiled(rules.TASK_INSERT[backend], backend)
        self.new_step = Compiled(rules.STEP_INSERT[backend], backend)
        self.existing = Compiled(rules.EXISTING, backend)
        self.adopt_task = Compiled(rules.ADOPT_TASK, backend)
        self.adopt_steps = Compiled(rules.ADOPT_STEPS, backend)
        # On PostgreSQL a transition is one statement (rules.TRANSITION_AS_ONE); SQLite batches
        # the separate statements in its writer thread's transaction instead.
        self.transition: dict[tuple[bool, bool], Compiled] = (
            {kind: Compiled(one, backend) for kind, one in rules.TRANSITION_AS_ONE.items()}
            if backend == "postgresql"
            else {}
        )
        statements = [v for v in vars(self).values() if isinstance(v, Compiled)] + list(self.transition.values())
        self._converted = tuple({k: f for c in statements for k, f in c.converted.items()}.items())

    def prepared(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` as the driver takes them, converted in place once for all the statements
        of a write: JSON as compact text, and on SQLite datetimes as the naive UTC text
        SQLAlchemy stores (``tables.UTCDateTime``). Which names need it is known from the
        statements' parameter types."""
        for name, convert in self._converted:
            value = params.get(name)
            if value is not None:
                params[name] = convert(value)
        return params


def _as_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _as_text(value: datetime) -> str:
    # SQLAlchemy's SQLite format, "%Y-%m-%d %H:%M:%S.%f", spelled the quicker way.
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("naive datetime given to the state store; use an aware UTC datetime")
    return (value - offset).replace(tzinfo=None).isoformat(" ", "microseconds")


SQLITE = HotPath("sqlite")
PG = HotPath("postgresql")


def accept_ids(accepted: TaskAccepted) -> dict[str, str | None]:
    """What an accept's look at an existing row, and its adoption of it, are keyed by."""
    return {"task_id": accepted.task_id, "run_id": accepted.run_id, "chain_id": accepted.chain_id}
