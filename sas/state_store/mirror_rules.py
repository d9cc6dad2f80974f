"""The one writer of ``tasks`` and ``steps``: every statement that changes a row of them is here.

Why one place: a step row used to be written by raw SQL for each backend, by ORM code and
by the CLI and the Supervisor directly, each with its own copy of the rules. Here each write
is one SQLAlchemy Core statement, built once and run on both backends: a session executes it
with a dict of parameters (``sas.state_store.mirror``: the Scheduler's, the Supervisor's and the
operators' writes), and the hot path executes the same statement compiled once for its own
driver connections (``sas.state_store.agent_writes``: acceptance and the Agents' writes).

How that is held (pyproject's import-linter contracts, and ``tests/state_store/test_one_writer.py``):
the tables live in ``sas.state_store.mirror_tables``, which only this module and the state store's
reads (``queries``, ``selection``, ``alerts``) may import; this module only ``mirror`` and
``agent_writes`` (its statements and its two writers) may import; everything else reads rows
through ``sas.state_store.queries`` as the read-only ``TaskRow``/``StepRow``; and the test fails
on any statement that writes the two tables outside this module (raw SQL, an ORM ``update``/``insert``/``delete``, an added row).

The rules, stated once:

- **Versions.** A transition applies only if its version is greater than the row's
  (``sas.task_models.versions``): retries and replays change nothing, a late write never wins.
- **Run ownership.** Only the task's own chain of runs writes its rows (``chain_id``); rows
  accepted before chains were recorded (``chain_id`` NULL) take any.
- **FailureCount never goes down**, whoever writes; the one exception is an operator's
  explicit reset (``StepTransition.reset_failure_count``), which also counts the reset.
- **State order.** Versioned writes are ordered by their version alone, whatever the states
  (Waiting and Skipped included). A write without a version of its own - an operator's park
  mark, the Supervisor's claim - is a compare-and-set on the state and version it read, and
  leaves the version, so every later write of the workflow wins. A repair from Temporal
  (``sas.reconciliation.repairs``) also compares-and-sets, and takes a version above the row's;
  for a finished workflow one stamped with the repair's time, so a late write of that run
  never undoes it (``mirror.repair_version``).
- **Errors.** A step that went through (Processed) clears its last error; an undone one keeps
  it: after a compensation, "what failed?" is the question an operator asks.
- **Notes.** A transition's ``note`` (why Skipped; what a Waiting step waits for) is kept
  until a transition brings another; None leaves it.
- **A task id is one task** (``judge_existing``): accepting it twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Delete,
    Insert,
    Integer,
    Select,
    Table,
    Update,
    bindparam,
    case,
    exists,
    func,
    literal_column,
    or_,
    select,
)
from sqlalchemy import delete as _delete
from sqlalchemy import update as _update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.elements import BindParameter

from sas.state_store.mirror_tables import Step, Task
from sas.state_store.tables import StepAttempt, shard_of
from sas.task_models import AcceptOutcome, StepState, StepTransition, TaskAccepted, TaskState
from sas.task_models.plans import KeptStep

_tasks = cast(Table, Task.__table__)
_steps = cast(Table, Step.__table__)
_attempts = cast(Table, StepAttempt.__table__)
_s, _t = _steps.c, _tasks.c

# States in which a task can no longer be adopted by a run that cannot prove it is of the same chain.
FINISHED = (str(TaskState.PROCESSED), str(TaskState.COMPENSATED), str(TaskState.ERROR))
# A task an operator's mark may still change: not finished by its workflow.
_UNFINISHED = (TaskState.PENDING, TaskState.PROCESSING, TaskState.FAILED, TaskState.COMPENSATING, TaskState.ERROR)
_CLEARS_ERROR = (StepState.PROCESSED,)


def _p(name: str, column: Any = None, type_: Any = None) -> BindParameter[Any]:
    """A named parameter, typed as its column (so each backend binds it as that column's type).

    Its bound name carries a prefix: SQLAlchemy reserves a column's own name for the values of
    an UPDATE or INSERT executed with parameters. ``bound`` adds it to a statement's parameters."""
    return bindparam(_PREFIX + name, type_=type_ if type_ is not None else column.type)


PARAM_PREFIX = _PREFIX = "p_"


def bound(params: Mapping[str, Any]) -> dict[str, Any]:
    """A statement's parameters under their bound names, for a session to execute it with."""
    return {_PREFIX + k: v for k, v in params.items()}


def _owned(table: Table) -> Any:
    """Run ownership: the row is of the writer's chain, or of no recorded chain."""
    return or_(table.c.chain_id.is_(None), table.c.chain_id == _p("chain_id", table.c.chain_id))


def _never_down(count: BindParameter[Any], reset: Any = None) -> Any:
    """FailureCount: the higher of the row's and the write's, or the write's on an operator's reset."""
    whens: list[Any] = [(reset, func.coalesce(count, _s.failure_count))] if reset is not None else []
    return case(*whens, (count > _s.failure_count, count), else_=_s.failure_count)


# -- the Scheduler's and the Agents' versioned writes -------------------------------------------

_fc = _p("failure_count", type_=Integer())
_reset = _p("reset", type_=Boolean())
_set_error = _p("set_error", type_=Boolean())

STEP_WRITE: Update = (
    _update(_steps)
    .where(_s.task_id == _p("task_id", _s.task_id), _s.name == _p("step", _s.name))
    .where(_s.version < _p("version", _s.version), _owned(_steps))
    .values(
        state=_p("state", _s.state),
        version=_p("version", _s.version),
        updated_at=_p("at", _s.updated_at),
        locked_by=_p("locked_by", _s.locked_by),
        complete_by=_p("complete_by", _s.complete_by),
        attempt=func.coalesce(_p("attempt", _s.attempt), _s.attempt),
        failure_count=_never_down(_fc, _reset),
        resets=case((_reset, _s.resets + literal_column("1")), else_=_s.resets),
        last_error=case((_set_error, _p("last_error", _s.last_error)), else_=_s.last_error),
        error_type=case((_set_error, _p("error_type", _s.error_type)), else_=_s.error_type),
        permanent=func.coalesce(_p("permanent", _s.permanent), _s.permanent),
        run_id=func.coalesce(_p("run_id", _s.run_id), _s.run_id),
        result=func.coalesce(_p("result", _s.result), _s.result),
        note=func.coalesce(_p("note", _s.note), _s.note),
    )
)
TASK_WRITE: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.version < _p("version", _t.version), _owned(_tasks))
    .values(
        state=_p("task_state", _t.state),
        current_step=_p("step", _t.current_step),
        version=_p("version", _t.version),
        updated_at=_p("at", _t.updated_at),
        run_id=func.coalesce(_p("run_id", _t.run_id), _t.run_id),
    )
)


def transition_params(t: StepTransition) -> dict[str, Any]:
    """The parameters of a transition's statements: STEP_WRITE, and TASK_WRITE when it moves its
    task (``task_state``), ATTEMPT_INSERT when it starts an attempt (``starts_attempt``)."""
    return {
        "task_id": t.task_id,
        "step": t.step,
        "version": t.version,
        "chain_id": t.chain_id,
        "state": str(t.state),
        "task_state": None if t.task_state is None else str(t.task_state),
        "at": t.at,
        "locked_by": t.locked_by,
        "complete_by": t.complete_by,
        "attempt": t.attempt,
        "failure_count": t.failure_count,
        "reset": t.reset_failure_count and t.failure_count is not None,
        "set_error": t.last_error is not None or t.state in _CLEARS_ERROR,
        "last_error": t.last_error,
        "error_type": t.error_type,
        "permanent": t.permanent,
        "run_id": t.run_id,
        "result": t.result,
        "note": t.note,
    }


def starts_attempt(t: StepTransition) -> bool:
    """An Agent's write that starts an attempt (it carries LockedBy): the attempt is kept too."""
    return t.locked_by is not None and t.attempt is not None


# -- acceptance: the task row and its Pending step rows, once ---------------------------------


def _insert_once(table: Table) -> dict[str, Insert]:
    """INSERT ... ON CONFLICT DO NOTHING for each backend (the one clause they spell alike but build apart)."""
    values = {c.name: _p(c.name, c) for c in table.c if c.name != "id"}  # id: autoincrement
    return {
        # inline: no RETURNING of the generated id, which nobody reads.
        "sqlite": sqlite_insert(table).values(values).on_conflict_do_nothing().inline(),
        "postgresql": pg_insert(table).values(values).on_conflict_do_nothing().inline(),
    }


TASK_INSERT = _insert_once(_tasks)
STEP_INSERT = _insert_once(_steps)
# An attempt's start (the Agent's write with LockedBy) is kept as a row of its own, in the same
# transaction as its step write and only if that applied (so only for the task's own chain);
# from the transition's own parameters.
_a = _attempts.c
_attempt_row = {
    "task_id": _p("task_id", _a.task_id), "step": _p("step", _a.step), "state": _p("state", _a.state),
    "attempt": _p("attempt", _a.attempt), "failure_count": func.coalesce(_fc, literal_column("0")),
    "locked_by": _p("locked_by", _a.locked_by), "complete_by": _p("complete_by", _a.complete_by),
    "started_at": _p("at", _a.started_at), "version": _p("version", _a.version),
    "chain_id": _p("chain_id", _a.chain_id), "run_id": _p("run_id", _a.run_id),
}  # fmt: skip
ATTEMPT_INSERT = {
    "sqlite": sqlite_insert(_attempts).values(_attempt_row).on_conflict_do_nothing().inline(),
    "postgresql": pg_insert(_attempts).values(_attempt_row).on_conflict_do_nothing().inline(),
}


def _transition_as_one_statement(moves_task: bool, starts: bool) -> Update | Insert:
    """PostgreSQL: a transition's statements (STEP_WRITE; TASK_WRITE if it ``moves_task``;
    ATTEMPT_INSERT if it ``starts`` an attempt, only if the step write applied) as one, with
    data-modifying CTEs: atomic on its own, so one round trip instead of BEGIN, two or three
    statements and COMMIT. The step row is written before the task row, as in a transaction of
    them (the main statement and a CTE it reads run before one it does not)."""
    if not starts:
        return STEP_WRITE.add_cte(TASK_WRITE.cte("task_written")) if moves_task else STEP_WRITE
    step_written = STEP_WRITE.returning(_s.task_id).cte("step_written")
    row = select(*(value.label(name) for name, value in _attempt_row.items()))
    attempt = (
        pg_insert(_attempts)
        .from_select(list(_attempt_row), row.where(exists(select(literal_column("1")).select_from(step_written))))
        .on_conflict_do_nothing()
    )
    return attempt.add_cte(TASK_WRITE.cte("task_written")) if moves_task else attempt


# (moves its task, starts an attempt) -> the statement, on PostgreSQL (``agent_writes``).
TRANSITION_AS_ONE: dict[tuple[bool, bool], Update | Insert] = {
    (moves_task, starts): _transition_as_one_statement(moves_task, starts)
    for moves_task in (False, True)
    for starts in (False, True)
}

EXISTING: Select[Any] = select(_t.chain_id, _t.state, _t.incarnation).where(_t.task_id == _p("task_id", _t.task_id))
# A run of the task's own chain (a reset to before the accept, a retried accept) takes the rows over.
ADOPT_TASK: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id))
    .values(run_id=_p("run_id", _t.run_id), chain_id=func.coalesce(_t.chain_id, _p("chain_id", _t.chain_id)))
)
ADOPT_STEPS: Update = (
    _update(_steps)
    .where(_s.task_id == _p("task_id", _s.task_id))
    .values(chain_id=func.coalesce(_s.chain_id, _p("chain_id", _s.chain_id)))
)


def new_task_params(a: TaskAccepted, at: datetime) -> dict[str, Any]:
    return {
        "task_id": a.task_id, "task_type": a.task_type, "workflow_type": a.workflow_type, "task_queue": a.task_queue,
        "state": str(TaskState.PENDING), "current_step": None, "payload": a.payload, "shard": shard_of(a.task_id),
        "version": 0, "chain_id": a.chain_id, "run_id": a.run_id, "incarnation": 1, "created_at": at, "updated_at": at,
        "parent_task_id": a.parent.task_id if a.parent else None, "parent_step": a.parent.step if a.parent else None,
    }  # fmt: skip


def new_step_params(
    a: TaskAccepted,
    at: datetime,
    resets: int = 0,
    keys: Mapping[str, str] | None = None,
    kept: Sequence[KeptStep] = (),
) -> list[dict[str, Any]]:
    """Pending rows of the accepted steps (``keys``: idempotency keys other than the plan's, for an
    incarnation; ``kept``: a redrive's steps, written as they were kept, done with their results)."""
    shard = shard_of(a.task_id)
    done = {k.name: k for k in kept}
    return [
        {
            "task_id": a.task_id, "name": p.name, "position": p.position, "agent": p.agent,
            "compensation": p.compensation, "locked_by": None, "complete_by": None,
            "failure_count": 0, "resets": resets, "attempt": 0, "last_error": None, "error_type": None,
            "permanent": False, "idempotency_key": (keys or {}).get(p.name, p.idempotency_key),
            "complete_by_s": p.resolved_policy.complete_by_s, "pivot": p.pivot, "version": 0,
            "chain_id": a.chain_id, "run_id": a.run_id, "updated_at": at, "shard": shard,
            **_first_state(done.get(p.name)),
        }
        for p in a.steps
    ]  # fmt: skip


def _first_state(kept: KeptStep | None) -> dict[str, Any]:
    """A new row's state: Pending, or a redrive's kept step as it was."""
    if kept is None:
        return {"state": str(StepState.PENDING), "result": None, "note": None}
    return {"state": str(kept.state), "result": kept.result, "note": "kept by a redrive"}


def judge_existing(chain_id: str | None, state: str, incarnation: int, accepted: TaskAccepted) -> AcceptOutcome:
    """Whether the run accepting ``accepted`` owns the task row already there.

    The same chain of runs (a reset or a retried accept) does. A row from before chains were
    recorded is adopted only while its task is unfinished; a finished one is never re-run."""
    same = chain_id == accepted.chain_id if chain_id is not None else state not in FINISHED
    if same:
        return AcceptOutcome(status="same_task", state=state, incarnation=incarnation)
    return AcceptOutcome(status="other_task", state=state, incarnation=incarnation)


# -- `sas resubmit`: the next incarnation's fresh rows (the finished one is archived first) ----

DROP_STEPS: Delete = _delete(_steps).where(_s.task_id == _p("task_id", _s.task_id))
RESTART_TASK: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.chain_id == _p("of", _t.chain_id))
    .values(
        state=str(TaskState.PENDING),
        current_step=None,
        version=0,
        payload=_p("payload", _t.payload),
        chain_id=_p("chain_id", _t.chain_id),
        run_id=_p("run_id", _t.run_id),
        incarnation=_p("incarnation", _t.incarnation),
        updated_at=_p("at", _t.updated_at),
    )
)

# -- writes without a version of their own: compare-and-set on what was read ------------------

_seen = (_s.task_id == _p("task_id", _s.task_id), _s.name == _p("step", _s.name))
_seen_version = _s.version == _p("seen_version", _s.version)
_seen_count = _s.failure_count == _p("seen_failure_count", _s.failure_count)
# The Supervisor's claim of a decision: the FailureCount it counts (never lower) and its next look.
CLAIM_STEP: Update = (
    _update(_steps)
    .where(*_seen, _seen_version, _seen_count, _s.failure_count <= _fc)
    .values(failure_count=_fc, complete_by=_p("complete_by", _s.complete_by))
)
# A look put off (the step waits for a worker, a breaker): no failure counted.
DEFER_STEP: Update = (
    _update(_steps).where(*_seen, _seen_version, _seen_count).values(complete_by=_p("complete_by", _s.complete_by))
)
# A task whose workflow died, marked Error with a version above anything that workflow can still write.
CLAIM_CLEANUP: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.state == _p("seen_state", _t.state))
    .where(_t.version == _p("seen_version", _t.version), _t.version < _p("version", _t.version))
    .values(state=str(TaskState.ERROR), version=_p("version", _t.version), updated_at=_p("at", _t.updated_at))
)
# An operator's mark (`sas park` of a running Agent, its un-park): the state only, the version kept.
MARK_STEP: Update = (
    _update(_steps)
    .where(*_seen, _seen_version, _s.state == _p("seen_state", _s.state))
    .values(state=_p("state", _s.state), updated_at=_p("at", _s.updated_at))
)
MARK_TASK: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.state.in_(_UNFINISHED))
    .values(state=_p("state", _t.state), current_step=_p("step", _t.current_step), updated_at=_p("at", _t.updated_at))
)
# A newer run of the task's own chain that wrote nothing new (a reset to the last workflow task of
# a finished workflow replays what the old run wrote): reconciliation records that it owns the
# task now, over the run it read, and changes nothing else - no version, no state, no time.
ADOPT_RUN: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.chain_id == _p("chain_id", _t.chain_id))
    .where(_t.run_id == _p("seen_run_id", _t.run_id))
    .values(run_id=_p("run_id", _t.run_id))
)
# A repair from Temporal's state (reconciliation): over the version read, to a newer one.
REPAIR_STEP: Update = (
    _update(_steps)
    .where(*_seen, _seen_version, _s.version < _p("version", _s.version))
    .values(
        state=_p("state", _s.state),
        version=_p("version", _s.version),
        updated_at=_p("at", _s.updated_at),
        complete_by=None,
        locked_by=None,
        failure_count=_never_down(_fc),
        result=func.coalesce(_p("result", _s.result), _s.result),
        note=func.coalesce(_p("note", _s.note), _s.note),
    )
)
REPAIR_TASK: Update = (
    _update(_tasks)
    .where(_t.task_id == _p("task_id", _t.task_id), _t.version == _p("seen_version", _t.version))
    .where(_t.version < _p("version", _t.version))
    .values(state=_p("state", _t.state), version=_p("version", _t.version), updated_at=_p("at", _t.updated_at))
)
