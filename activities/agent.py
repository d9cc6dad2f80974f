"""What every Agent does around its remote call: record the attempt, call, record the outcome.

The Agent itself writes Processing/LockedBy/CompleteBy when an attempt starts and
Processed when it succeeds, so the happy path needs no separate mirror writes.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.remote import GARBAGE, RemoteCaller
from state_store.agent_writes import StepWriter
from task_models import StepCall, StepResult, StepState, StepTransition, TaskState, shown
from task_models.activity_defs import agent_result
from task_models.versions import Phase, version_of

INVALID_INPUT = "InvalidInput"
log = logging.getLogger("sas.agent")

M = TypeVar("M", bound=BaseModel)


class Agent:
    """Base of the Agents: one per remote service, built by the worker with its dependencies."""

    def __init__(self, remote: RemoteCaller, writer: StepWriter, identity: str) -> None:
        self._remote = remote
        self._writer = writer
        self._identity = identity

    async def perform(self, call: StepCall, path: str, body: BaseModel) -> StepResult:
        info = activity.info()
        timeout = info.start_to_close_timeout or timedelta(seconds=30)
        complete_by = info.started_time.astimezone(UTC) + timeout
        running, done = (
            (StepState.COMPENSATING, StepState.COMPENSATED)
            if call.compensation
            else (StepState.PROCESSING, StepState.PROCESSED)
        )
        await self._record(
            call,
            Phase.AGENT_STARTED,
            info.attempt,
            state=running,
            locked_by=self._identity,
            complete_by=complete_by,
            task_state=TaskState.COMPENSATING if call.compensation else TaskState.PROCESSING,
        )
        answer = await self._remote.post(path, body.model_dump(mode="json"), call.idempotency_key, complete_by)
        model = agent_result(info.activity_type)
        data = _validated(model, path, answer) if model is not None else answer
        # The result rides on the Processed write itself (one statement, no extra round trip),
        # without its secret fields. An undo's result is not stored: the step keeps its forward one.
        stored = shown(model, data) if model is not None and not call.compensation else None
        await self._record(
            call, Phase.AGENT_DONE, info.attempt, state=done, task_state=call.stamp.task_state_on_done, result=stored
        )
        return StepResult(data=data)

    async def forward_id(self, call: StepCall, service: str, field: str) -> str | None:
        """For an undo: the service's id of the forward effect, which the undo must name.

        From the forward step's result when the Scheduler has it; otherwise (the forward answer
        never arrived, or a clean-up working from the state store) looked up by our forward key.
        None: the service did nothing under that key, so there is nothing to name."""
        known = (call.forward_result or {}).get(field)
        if isinstance(known, str) and known:
            return known
        if not call.target_key:
            return None
        info = activity.info()
        complete_by = info.started_time.astimezone(UTC) + (info.start_to_close_timeout or timedelta(seconds=30))
        found = await self._remote.get(f"/{service}/lookup", {"idempotency_key": call.target_key}, complete_by)
        value = found.get(field)
        return value if isinstance(value, str) and value else None

    async def _record(self, call: StepCall, phase: Phase, attempt: int, **fields: Any) -> None:
        transition = StepTransition(
            task_id=call.task_id,
            step=call.step,
            version=version_of(call.stamp.seq, attempt, phase),
            at=datetime.now(UTC),
            attempt=attempt,
            failure_count=call.stamp.failure_count,
            run_id=activity.info().workflow_run_id,
            chain_id=call.stamp.chain_id,
            **fields,
        )
        # A state-store outage must not fail the step: keep trying while the attempt has
        # time left (heartbeating, so Temporal knows this Agent is alive), and only then
        # give the attempt back to Temporal's retry policy.
        info = activity.info()
        deadline = info.started_time.astimezone(UTC) + (info.start_to_close_timeout or timedelta(seconds=30))
        delay = 0.2
        while True:
            try:
                await self._writer.write(transition)
                return
            except Exception as err:
                left = (deadline - datetime.now(UTC)).total_seconds()
                if left < delay + 1.0:
                    raise
                log.warning("state store write failed, retrying in %.1fs: %s: %s", delay, type(err).__name__, err)
                activity.heartbeat()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


def _validated(model: type[BaseModel], path: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The service's answer as the step's result model; an answer that is not one is garbage
    (retryable: a misbehaving service, not a refusal)."""
    try:
        return model.model_validate(answer).model_dump(mode="json")
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False)[:3])
        raise ApplicationError(f"{path} answered without a valid {model.__name__}: {problems}", type=GARBAGE) from None


def parse_payload(model: type[M], call: StepCall, **extra: Any) -> M:
    """Build the service request from the task payload; bad data is a permanent fault."""
    try:
        return model.model_validate({**call.payload, **extra})
    except ValidationError as err:
        raise ApplicationError(
            f"step {call.step} of task {call.task_id}: invalid data for {model.__name__}: {err}",
            type=INVALID_INPUT,
            non_retryable=True,
        ) from err
