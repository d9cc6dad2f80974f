"""Whose fault a per-task failure is: the task's own (alerted, the sweep goes on) or the service's
(Temporal or the database away: the sweep is retried). Read in one place, from the error."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy import exc as sa_exc
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError, RPCStatusCode

from sas.supervisor.task_faults import task_fault
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
