"""Whose fault a per-task failure is: the task's own (alerted, the sweep goes on) or the service's
(Temporal or the database away: the sweep is retried). Read in one place, from the error."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy import exc as sa_exc
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError, RPCStatusCode

from sas.runtime.task_faults import task_fault
from sas.task_models import OperatorRequest
from sas.task_models.status import MAX_FAILURE_COUNT


def rpc(status: RPCStatusCode) -> RPCError:
    return RPCError(f"{status.name.lower()} from the server", status, b"")


def invalid_request() -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        OperatorRequest(failure_count=MAX_FAILURE_COUNT + 1)
    return caught.value


@pytest.mark.parametrize(
    ("err", "cause", "for_good"),
    [
        (
            WorkflowQueryFailedError("Workflow class RetiredOrderWorkflow is not registered on this worker"),
            "workflow type not registered on any worker",
            False,
        ),
        (WorkflowQueryFailedError("GRPC Message too large"), "its answer is too large for a message", False),
        (WorkflowQueryFailedError("this type's status cannot be shown"), "status query failed: ", False),
        (WorkflowQueryRejectedError(None), "status query rejected", False),
        (rpc(RPCStatusCode.RESOURCE_EXHAUSTED), "over its size or limits", True),
        (rpc(RPCStatusCode.INVALID_ARGUMENT), "Temporal said INVALID_ARGUMENT", True),
        (rpc(RPCStatusCode.DEADLINE_EXCEEDED), "Temporal said DEADLINE_EXCEEDED", False),
        (TimeoutError(), "no answer within 8 s", False),
        (invalid_request(), "invalid as it is", True),
        (sa_exc.IntegrityError("INSERT", {}, Exception("constraint")), "the state store refused it", True),
        (KeyError("a bug met with one task's data"), "KeyError", False),
    ],
)
def test_a_failure_of_the_task_is_the_tasks_alone(err: BaseException, cause: str, for_good: bool) -> None:
    fault = task_fault(err, 8.0)
    assert fault is not None and cause in fault.cause and fault.for_good == for_good


@pytest.mark.parametrize(
    "err",
    [
        rpc(RPCStatusCode.UNAVAILABLE),
        rpc(RPCStatusCode.CANCELLED),
        rpc(RPCStatusCode.INTERNAL),
        sa_exc.OperationalError("SELECT", {}, Exception("database is locked")),
        ConnectionRefusedError(),
    ],
)
def test_temporal_or_the_database_away_fails_the_sweep(err: BaseException) -> None:
    assert task_fault(err, 8.0) is None


async def test_a_timeout_is_the_tasks_fault_only_when_it_repeats(sqlite_url: str) -> None:
    """One task running out of its bound may have met a loaded machine: it is asked again at the
    next sweep, and alerted only when it runs out of it TIMEOUTS_BEFORE_ALERT times in a row. An
    answer in between starts the count again."""
    import asyncio

    from sqlalchemy import select

    from sas import state_store
    from sas.runtime.task_faults import TaskFault
    from sas.settings import DatabaseSettings
    from sas.state_store.tables import Alert
    from sas.supervisor.per_task import ALERT_KIND, TIMEOUTS_BEFORE_ALERT, isolated

    await state_store.upgrade_async(sqlite_url)
    engine = state_store.create_engine(DatabaseSettings(url=sqlite_url))
    sessions = state_store.session_factory(engine)

    async def hangs() -> str:
        await asyncio.Event().wait()
        return "never"

    async def answers() -> str:
        return "answered"

    async def alerted() -> list[str]:
        async with sessions() as session:
            return [a.message for a in (await session.scalars(select(Alert).where(Alert.kind == ALERT_KIND))).all()]

    try:
        for _ in range(TIMEOUTS_BEFORE_ALERT - 1):
            assert isinstance(await isolated(sessions, "t-slow", "orphan check", hangs, timeout_s=0.01), TaskFault)
        assert await alerted() == []
        assert await isolated(sessions, "t-slow", "orphan check", answers) == "answered"
        for _ in range(TIMEOUTS_BEFORE_ALERT - 1):
            await isolated(sessions, "t-slow", "orphan check", hangs, timeout_s=0.01)
        assert await alerted() == []  # the answer in between started the count again
        await isolated(sessions, "t-slow", "orphan check", hangs, timeout_s=0.01)
        assert await alerted() == ["task t-slow: orphan check failed: no answer within 0.01 s"]
    finally:
        await engine.dispose()
