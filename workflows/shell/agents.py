"""Where the Scheduler calls an Agent: one activity per attempt of a step or of its undo, on
the queue the plan names for it (the workflow's, or its service's own), with the step's
complete-by as its start-to-close timeout. Also how
an Agent's failure reads (message, type, permanent) and whether it was only held by its
service's circuit breaker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from sas.breaker.model import BREAKER_OPEN
    from sas.task_models import (
        MirrorStamp,
        StepCall,
        StepPlan,
        StepPolicyValues,
        StepResult,
        TaskState,
        TaskStatus,
        seals,
    )
    from sas.task_models.queues import SLOTS_FULL, service_of, service_queue
    from sas.task_models.text import MAX_ERROR_TEXT, bounded
    from sas.workflows.shell.records import Records

# A held attempt on the workflow's queue starts again on its service's own queue (held_by_service).
HELD_IN_SERVICE_QUEUE = "held-calls-wait-in-their-service-queue"

# Asked only when a result does not carry its Agent's seal, so a task's happy path records no
# marker: a run before it took such a result as it came, and replays so.
REFUSE_UNSEALED_RESULTS = "refuse-results-no-agent-sealed"
FOREIGN_RESULT = seals.FOREIGN_RESULT
# How much of a claimed result is quoted in the step's error and the audit log.
_MAX_CLAIM = 300

# How a forward attempt is cancelled when undoing begins: the cancel resolves only once the
# attempt has really ended, so its undo is decided on what the service did, never while the
# request may still land (tests/e2e/test_cancelled_attempt_waited.py fails with TRY_CANCEL).
FORWARD_CANCELLATION = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


def start_agent(
    name: str,
    call: StepCall,
    *,
    task_queue: str | None,
    policy: StepPolicyValues,
    summary: str,
    wait_when_cancelled: bool = False,
    compact: bool = False,
) -> workflow.ActivityHandle[StepResult]:
    """Start one attempt of an Agent, by its activity name: the name the accepted plan (or the
    mirror, for a clean-up) recorded, so a rename in code never changes what a task runs.
    ``wait_when_cancelled``: a cancel of this attempt resolves only once the attempt has ended
    (bounded by its complete-by), for a forward call whose undo may follow; await it with
    ``until_ended``. The call carries this run's seal for ``name``: an Agent runs no call
    without it (sas/runtime/activity_owners.py). ``compact``: the call leaves out the names its
    Agent's worker reads from Temporal (``StepCall.compact_for``; sas/runtime/whole_calls.py), for
    a task whose plan is compact, which only workers that read compact calls run."""
    info = workflow.info()
    call = call.model_copy(update={"seal": seals.call_seal(info.workflow_id, info.run_id, name, call)})
    if compact:
        call = call.compact_for(info.workflow_id, info.run_id)
    return workflow.start_activity(
        name,
        call,
        result_type=StepResult,
        task_queue=task_queue,  # its service's own queue; None: the workflow's
        start_to_close_timeout=policy.complete_by,
        heartbeat_timeout=policy.heartbeat,
        retry_policy=retry_policy(policy),
        cancellation_type=FORWARD_CANCELLATION if wait_when_cancelled else ActivityCancellationType.TRY_CANCEL,
        summary=summary,
    )


async def until_ended(handle: workflow.ActivityHandle[StepResult]) -> StepResult:
    """The outcome of an attempt started with ``wait_when_cancelled``. When the workflow itself
    is cancelled, the attempt is cancelled and waited for, then the cancellation goes on: left to
    the SDK, an attempt that ended otherwise than cancelled (it completed, or reached its
    complete-by) would swallow the workflow's cancellation."""
    try:
        return await asyncio.shield(handle)
    except asyncio.CancelledError:
        handle.cancel()
        while not handle.done():
            try:
                await workflow.wait([handle])
            except asyncio.CancelledError:
                continue  # cancelled again: still waiting for the attempt to end
        if not handle.cancelled():
            handle.exception()  # retrieved: its outcome is the cancellation's now
        raise


def foreign_claim(name: str, call: StepCall, result: StepResult) -> str | None:
    """Why ``result`` is not taken: None when ``name``'s Agent sealed it for ``call`` of this run;
    else what was claimed, and by no Agent of sas (``temporal activity complete``, a result
    replayed from another task). A history from before this rule took the result, and replays so."""
    info = workflow.info()
    if seals.result_sealed(info.workflow_id, info.run_id, name, call, result):
        return None
    if not workflow.patched(REFUSE_UNSEALED_RESULTS):
        return None
    claimed = bounded(json.dumps(result.data, sort_keys=True, default=str), _MAX_CLAIM)
    return (
        f"{name} completed with a result no Agent of sas sealed (completed from outside, e.g. "
        f"`temporal activity complete`); not taken: claimed {claimed}"
    )


def retry_policy(policy: StepPolicyValues) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=policy.initial_interval_s),
        backoff_coefficient=policy.backoff,
        maximum_interval=timedelta(seconds=policy.max_interval_s),
        maximum_attempts=policy.max_attempts,
    )


# An error type is a name; a longer one is cut, like any text an Agent relays.
_MAX_ERROR_TYPE = 200


def describe(err: ActivityError) -> tuple[str, str, bool]:
    """Message, type and permanence of an Agent's failure, for the record and the Supervisor.

    The message is cut to MAX_ERROR_TEXT bytes here too, whatever the Agent did (a team's own
    Agent, a worker of an older version): it is kept in the task's status and its events."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        kind = bounded(cause.type or "ApplicationError", _MAX_ERROR_TYPE)
        return bounded(cause.message, MAX_ERROR_TEXT), kind, cause.non_retryable
    if isinstance(cause, TimeoutError):
        kind = cause.type.name if cause.type is not None else "UNKNOWN"
        return f"no answer within the step's {kind.lower().replace('_', '-')} timeout", f"Timeout:{kind}", False
    if isinstance(cause, CancelledError):
        return "the attempt was cancelled", "Cancelled", False
    return bounded(str(cause or err), MAX_ERROR_TEXT), type(cause or err).__name__, False


def cancelled(err: ActivityError) -> bool:
    return isinstance(err.cause, CancelledError)


@dataclass(frozen=True)
class Held:
    """An attempt the Agent refused before calling, to start again on ``queue``."""

    queue: str | None


def held_cause(err: ActivityError) -> ApplicationError | None:
    """The refusal, if the Agent only refused to call: its service's circuit breaker holds it
    (``BREAKER_OPEN``), or every slot of a service sharing the workflow's queue is busy
    (``SLOTS_FULL``, task_models/queues.py)."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type in (BREAKER_OPEN, SLOTS_FULL):
        return cause
    return None


async def held_by_service(
    queue: str | None, agent: str, step: str, err: ActivityError, note: Callable[[str], None]
) -> Held | None:
    """Whether the attempt on ``queue`` was only refused (``held_cause``): not a failure of the
    step, which is then started again without spending an attempt or a Supervisor decision; and
    where. On a service's own queue the new attempt waits there, unpolled while the breaker
    holds, until the service's worker takes it. On the workflow's queue (a service sharing it) it
    starts again on the service's own queue, which every worker serves: it waits there, in
    Temporal, holding none of the workflow worker's slots. (Histories from before this waited
    for the breaker's next probe on the workflow's queue, and replay so.)"""
    cause = held_cause(err)
    if cause is None:
        return None
    details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
    # The worker's own words where it gave them (a call waiting its turn in a release is refused as
    # a held one is, and is not held by an open breaker); bounded, since they are a worker's answer.
    said = details.get("why")
    why = (
        "every slot of its service is busy"
        if cause.type == SLOTS_FULL
        else said[:200]
        if isinstance(said, str) and said
        else "the circuit breaker of its service is open"
    )
    if queue is None and workflow.patched(HELD_IN_SERVICE_QUEUE):
        own = service_queue(workflow.info().task_queue, service_of(agent))
        note(f"{step}: held, {why}; started again in its service's own queue")
        return Held(own)
    note(f"{step}: held, {why}; started again")
    if queue is None:
        await workflow.sleep(timedelta(seconds=float(details.get("retry_in_s", 5.0))))
    return Held(queue)


async def shielded(task: asyncio.Future[Any]) -> Any:
    """Await ``task`` through any number of cancellations: once undoing has begun, cancelling
    the workflow must not leave it half done."""
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            workflow.logger.warning("cancellation ignored while compensating")


def step_call(
    status: TaskStatus,
    plan: StepPlan,
    records: Records,
    payload: dict[str, Any],
    results: dict[str, dict[str, Any]],
    *,
    compensation: bool,
    task_state_on_done: TaskState | None = None,
    earlier: list[str] | None = None,
) -> StepCall:
    """The message to an Agent: the step, its key, the stamp its own mirror writes carry, and
    the results it may use (the earlier steps' forward; its own, for an undo)."""
    step = next(s for s in status.steps if s.name == plan.name)
    return StepCall(
        task_id=status.task_id,
        task_type=status.task_type,
        step=plan.name,
        position=plan.position,
        idempotency_key=f"{plan.idempotency_key}:undo" if compensation else plan.idempotency_key,
        target_key=plan.idempotency_key if compensation else None,
        compensation=compensation,
        payload=payload,
        stamp=MirrorStamp(
            seq=records.stamp,
            chain_id=records.chain_id,
            failure_count=step.failure_count,
            task_state_on_done=task_state_on_done,
        ),
        results={} if compensation else {name: results[name] for name in earlier or [] if name in results},
        forward_result=results.get(plan.name) if compensation else None,
    )
