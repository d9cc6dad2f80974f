"""What every Agent does around its remote call: record the attempt, call, record the outcome.

The Agent itself writes Processing/LockedBy/CompleteBy when an attempt starts and
Processed when it succeeds, so the happy path needs no separate mirror writes. The attempt's
start is written before its call; a forward step's Processed is written behind its answer,
unless the step completes the task (``_finish``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.heartbeats import beat
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.activities.remote_answers import GARBAGE, nothing_done
from sas.state_store.agent_writes.writer import StepWriter
from sas.state_store.rejections import refused_for_good
from sas.task_models import StepCall, StepResult, StepState, StepTransition, TaskState, seals, shown
from sas.task_models.activity_defs import agent_result
from sas.task_models.results import MAX_RESULT_BYTES
from sas.task_models.text import MAX_ERROR_TEXT, bounded
from sas.task_models.versions import Phase, version_of
from sas.task_types.services import Service, named_service

INVALID_INPUT = "InvalidInput"
log = logging.getLogger("sas.agent")
# How often an Agent waiting on the state store tells Temporal it is alive (below any heartbeat timeout).
_BEAT_S = 0.5
# How long a write the attempt does not wait for is tried: it holds nothing up, and a worker
# stopping waits for it (StepWriter.behind) for as long.
_BEHIND_FOR = timedelta(seconds=30)

M = TypeVar("M", bound=BaseModel)


class Agent:
    """Base of the Agents: one per remote service, built by the worker with its dependencies."""

    def __init__(
        self,
        remote: RemoteCaller,
        writer: StepWriter,
        identity: str,
        refused: RefusedWrites,
        service: Service | None = None,
    ) -> None:
        self._remote = remote
        self._writer = writer
        self._identity = identity
        self._refused = refused
        # The service an Agent class of the older form runs for: its lookup is the declared one.
        self._service = service

    async def perform(
        self,
        call: StepCall,
        path: str,
        body: BaseModel | dict[str, Any] | None,
        *,
        method: str = "POST",
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        picked: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> StepResult:
        """Record the attempt (Processing, or Compensating for an undo), send ``body`` to the
        service under the step's Idempotency-Key before the attempt's complete-by, validate the
        answer against the Agent's result model and record it (Processed or Compensated).

        Args:
            call: What the Scheduler asked for.
            path: The URL path under the service's URL.
            body: The JSON body: a model, or a dict of JSON values; None sends none (a GET).
            method: The HTTP method (POST unless declared otherwise).
            query, headers: Declared query parameters and headers (``HttpCall``).
            picked: Takes the result's fields out of a nested answer (``HttpCall.pick``).

        Returns:
            The service's answer, as the result model dumped to JSON (secret fields included).
        """
        complete_by = await self._begin(call)
        payload = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
        answer = await self._remote.post(
            path, payload, call.idempotency_key, complete_by, method=method, query=query, headers=headers
        )
        if picked is not None:
            answer = picked(answer)
        model = agent_result(activity.info().activity_type)
        data = _validated(model, path, answer) if model is not None else answer
        return await self._finish(call, data, model)

    async def send(
        self, path: str, payload: dict[str, Any], key: str, complete_by: datetime, *, method: str = "POST"
    ) -> dict[str, Any]:
        """A call that is a part of the step (one parcel of a shipment), under its own key and
        before ``complete_by``, with no mirror write: the step's own call is ``perform``."""
        return await self._remote.post(path, payload, key, complete_by, method=method)

    async def nothing_to_undo(self, call: StepCall) -> StepResult:
        """An undo with nothing to send: the service did nothing under the forward step's key
        (its lookup says so). Recorded as Compensated, like an undo that was sent."""
        await self._begin(call)
        return await self._finish(call, {}, None)

    async def _begin(self, call: StepCall) -> datetime:
        """Record the attempt's start; its complete-by."""
        info = activity.info()
        complete_by = attempt_deadline()
        await self._record(
            call,
            Phase.AGENT_STARTED,
            info.attempt,
            state=StepState.COMPENSATING if call.compensation else StepState.PROCESSING,
            locked_by=self._identity,
            complete_by=complete_by,
            task_state=TaskState.COMPENSATING if call.compensation else TaskState.PROCESSING,
        )
        return complete_by

    async def _finish(self, call: StepCall, data: dict[str, Any], model: type[BaseModel] | None) -> StepResult:
        size = len(json.dumps(data, ensure_ascii=True, separators=(",", ":")))
        if size > MAX_RESULT_BYTES:
            raise ApplicationError(
                f"{activity.info().activity_type} answered a result of {size:,} bytes as JSON, more than the "
                f"{MAX_RESULT_BYTES:,} a step's result may be (it is kept in the task's history and status)",
                type=GARBAGE,
            )
        # The result rides on the Processed write itself (one statement, no extra round trip),
        # without its secret fields. An undo's result is not stored: the step keeps its forward one.
        stored = shown(model, data) if model is not None and not call.compensation else None
        done = StepState.COMPENSATED if call.compensation else StepState.PROCESSED
        attempt = activity.info().attempt
        fields: dict[str, Any] = {"state": done, "task_state": call.stamp.task_state_on_done, "result": stored}
        if call.compensation or call.stamp.task_state_on_done is not None:
            # An undo's outcome, and the step that completes the task, are in the mirror before
            # Temporal hears of them: a clean-up and a client reading the row after the result
            # must find them.
            await self._record(call, Phase.AGENT_DONE, attempt, **fields)
        else:
            # Any other forward success goes on while Temporal starts the next step: nothing
            # waits on it. If it is lost (the worker dies first), the row still says Processing,
            # which is what an undo needs to know (the call may have reached the service), and
            # reconciliation writes Processed from Temporal. Being versioned, it cannot overwrite
            # the next step's later writes.
            self._writer.behind(self._record(call, Phase.AGENT_DONE, attempt, behind=True, **fields))
        return sealed_result(call, data)

    async def look_up(self, call: StepCall, service: Service) -> dict[str, Any] | None:
        """For an undo: what the service says it did under the forward step's key, asked at the
        service's declared lookup path (``Service(lookup=)``, ``Service.lookup_path``). Every Agent
        form, the clean-up's undos and the test kit's real Agents ask here, so no Agent can ask
        another path than the one the service declares.

        Returns:
            The lookup's answer; None when it says nothing was done under that key (a 404 or
            refusal), which also voids the key at the service.

        Raises:
            ApplicationError: non-retryable, when the service declares no lookup (a hand-written
                undo that needs the forward's id cannot know it: an operator must decide).
        """
        if not call.target_key:
            return None
        lookup = service.lookup_path
        if lookup is None:
            raise ApplicationError(
                f"{activity.info().activity_type}: the forward step's answer never arrived and the service "
                "declares no lookup (Service(lookup=None)), so what it did cannot be known",
                type=INVALID_INPUT,
                non_retryable=True,
            )
        try:
            return await self._remote.get(lookup, {"idempotency_key": call.target_key}, attempt_deadline())
        except ApplicationError as err:
            if nothing_done(err):
                return None
            raise

    async def forward_id(self, call: StepCall, service: Service | str, field: str) -> str | None:
        """For an undo: the service's id of the forward effect, which the undo must name.

        From the forward step's result when the Scheduler has it; otherwise (the forward answer
        never arrived, or a clean-up working from the state store) from the service's lookup
        (``look_up``) by our forward key. None: the service did nothing under that key, so there
        is nothing to name. ``service``: the declared ``Service``; a name (the older Agent form)
        stands for the service this Agent was built for."""
        known = (call.forward_result or {}).get(field)
        if isinstance(known, str) and known:
            return known
        found = await self.look_up(call, self._declared(service))
        value = (found or {}).get(field)
        return value if isinstance(value, str) and value else None

    def _declared(self, service: Service | str) -> Service:
        if isinstance(service, Service):
            return service
        if self._service is not None and self._service.name == service:
            return self._service
        return named_service(service)

    async def _record(self, call: StepCall, phase: Phase, attempt: int, *, behind: bool = False, **fields: Any) -> None:
        """Write a transition of the step's row, trying again while the attempt can spare the
        time. ``behind``: a write the attempt does not wait for, which neither heartbeats nor
        counts against the attempt's time, but is tried for ``_BEHIND_FOR`` instead."""
        if call.item_key is not None:
            # A fan-out's items share one step row, which the Scheduler writes with their counts:
            # a thousand Agents writing it would only race each other.
            return
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
        # The mirror follows Temporal: a state store that is down must not fail the step, however
        # long it is down. The write is tried while the attempt can spare the time (half of what
        # is left before the Processing write, so the remote call keeps the rest), then the step
        # goes on without it: Temporal records the attempt, and the Supervisor's reconciliation
        # writes the row from Temporal's state once the store is back. Heartbeats meanwhile tell
        # Temporal this Agent is alive.
        info = activity.info()
        deadline = info.started_time.astimezone(UTC) + (info.start_to_close_timeout or timedelta(seconds=30))
        now = datetime.now(UTC)
        spare = (deadline - now) / 2 if phase == Phase.AGENT_STARTED else deadline - now - timedelta(seconds=1)
        give_up_at = now + (_BEHIND_FOR if behind else max(spare, timedelta(0)))
        beating = not behind
        delay = 0.2
        while True:
            try:
                await self._write_beating(transition, give_up_at, beating)
                return
            except Exception as err:  # noqa: BLE001 - any failure of the store: the step goes on regardless
                if refused_for_good(err):
                    # The step itself is fine: it goes on, Temporal records it, and an operator
                    # is told the mirror row is stale. Retrying would refuse again for ever.
                    await self._refused.report(call.task_id, call.step, f"{call.step} {fields.get('state')}", err)
                    return
                left = (give_up_at - datetime.now(UTC)).total_seconds()
                if left < delay:
                    log.warning(
                        "state store unreachable: task %s step %s goes on without its %s row "
                        "(reconciliation writes it from Temporal later): %s: %s",
                        call.task_id,
                        call.step,
                        fields.get("state"),
                        type(err).__name__,
                        err,
                    )
                    return
                log.warning("state store write failed, retrying in %.1fs: %s: %s", delay, type(err).__name__, err)
                if beating:
                    beat()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _write_beating(self, transition: StepTransition, give_up_at: datetime, beating: bool) -> None:
        """One write, heartbeating while it waits (a locked or slow store can hold it for longer
        than the step's heartbeat timeout); TimeoutError if it has not landed by ``give_up_at``."""
        write = asyncio.ensure_future(self._writer.write(transition))
        try:
            while not write.done():
                left = (give_up_at - datetime.now(UTC)).total_seconds()
                if left <= 0:
                    raise TimeoutError("the state store did not answer in time")
                await asyncio.wait({write}, timeout=min(left, _BEAT_S))
                if beating and not write.done():
                    beat()
            write.result()
        finally:
            if not write.done():
                write.cancel()


def sealed_result(call: StepCall, data: dict[str, Any]) -> StepResult:
    """``data`` as this attempt's result, sealed for the run and call Temporal gave it: the
    Scheduler takes no result without its Agent's seal (sas.task_models.seals)."""
    info = activity.info()
    seal = seals.result_seal(info.workflow_id or "", info.workflow_run_id or "", info.activity_type, call, data)
    return StepResult(data=data, seal=seal)


def attempt_deadline() -> datetime:
    """This attempt's complete-by: its start plus its start-to-close timeout."""
    info = activity.info()
    return info.started_time.astimezone(UTC) + (info.start_to_close_timeout or timedelta(seconds=30))


def _validated(model: type[BaseModel], path: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The service's answer as the step's result model; an answer that is not one is garbage
    (retryable: a misbehaving service, not a refusal)."""
    try:
        return model.model_validate(answer).model_dump(mode="json")
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False)[:3])
        # The locations name the answer's own keys: what a service says is bounded before it is kept.
        message = bounded(f"{path} answered without a valid {model.__name__}: {problems}", MAX_ERROR_TEXT)
        raise ApplicationError(message, type=GARBAGE) from None


def parse_payload(model: type[M], call: StepCall, **extra: Any) -> M:
    """Build the service request from the task payload; bad data is a permanent fault."""
    try:
        return model.model_validate({**call.payload, **extra})
    except ValidationError as err:
        raise ApplicationError(
            bounded(
                f"step {call.step} of task {call.task_id}: invalid data for {model.__name__}: {err}", MAX_ERROR_TEXT
            ),
            type=INVALID_INPUT,
            non_retryable=True,
        ) from err
