"""What went wrong with one task's operation, read from the error in one place.

The Supervisor asks Temporal (describe, a ``status`` query, a signal) and the state store about
each task on its own. When one of those fails, the question is whose fault it is:

- the task's own (its workflow type is registered on no worker, its query fails or answers
  with more than a message may carry, its decision cannot be sent as it is, it does not answer
  within its bound): the same on every try, so it is that task's alone - one alert, and the
  sweep goes on with the others;
- the service's (Temporal or the database cannot be reached): every task would fail alike, so
  the sweep's activity fails and Temporal retries it, as before.

Anything not known as the service's is the task's: an unknown error in one task's data must not
stop the sweep for every other task.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import exc as sa_exc
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError, RPCStatusCode

from sas.state_store.rejections import describe, refused_for_good

# Temporal itself is away or overloaded: nothing about one task.
_SERVICE_AWAY = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.CANCELLED, RPCStatusCode.INTERNAL)
# Temporal refuses the request as it is (a message over its size, an argument it cannot take):
# sending it again can never succeed.
_REFUSED_AS_IS = (
    RPCStatusCode.INVALID_ARGUMENT,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.OUT_OF_RANGE,
)
# The SDK's wording when no worker polling the queue registers the workflow's type.
_NOT_REGISTERED = "is not registered on this worker"
# Its wording when a query's answer is over the gRPC message size.
_TOO_LARGE = "too large"


@dataclass(frozen=True)
class TaskFault:
    """One task's failure: ``cause`` says what, in one line; ``for_good`` when no retry can help."""

    cause: str
    for_good: bool = False


def task_fault(err: BaseException, timeout_s: float) -> TaskFault | None:
    """The task's fault in ``err``, or None when the service itself is away (the sweep is retried)."""
    if isinstance(err, TimeoutError):
        return TaskFault(f"no answer within {timeout_s:g} s")
    if isinstance(err, WorkflowQueryFailedError):
        if _NOT_REGISTERED in err.message:
            return TaskFault(f"workflow type not registered on any worker: {describe(err)}")
        if _TOO_LARGE in err.message:
            return TaskFault(f"status query failed: its answer is too large for a message: {describe(err)}")
        return TaskFault(f"status query failed: {describe(err)}")
    if isinstance(err, WorkflowQueryRejectedError):
        return TaskFault(f"status query rejected: {describe(err)}")
    if isinstance(err, RPCError):
        if err.status in _SERVICE_AWAY:
            return None
        if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            return TaskFault(f"Temporal refused a message over its size or limits: {describe(err)}", for_good=True)
        return TaskFault(f"Temporal said {err.status.name}: {describe(err)}", for_good=err.status in _REFUSED_AS_IS)
    if isinstance(err, ValidationError):
        return TaskFault(f"invalid as it is: {describe(err)}", for_good=True)
    if refused_for_good(err):
        return TaskFault(f"the state store refused it: {describe(err)}", for_good=True)
    if isinstance(err, (sa_exc.OperationalError, sa_exc.InterfaceError, ConnectionError, OSError)):
        return None  # the database (or the network) is away
    return TaskFault(describe(err))
