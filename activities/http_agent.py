"""sas's generic HTTP Agent: runs the steps whose remote call is declared as data (``HttpCall``).

It is an ``Agent`` like the hand-written ones, on its service's caller: the same mirror writes
(Processing/Compensating, then Processed/Compensated with the result), the same call
(``activities/remote.py``: Idempotency-Key, complete-by, transient versus permanent, bulkhead,
breaker, heartbeats, the checked client) and the same validation of the answer against the
declared result model. What it adds is building the body from the declaration.

An undo names the forward effect through ``Forward(field)``: from the forward step's result
when the Scheduler has it; otherwise the service's lookup is asked by the forward step's key.
When the lookup says the service did nothing under that key - the forward was refused for good
(a 4xx answer), or never reached it - the undo is not sent: there is nothing to undo, and a
service need not accept an undo of nothing. That answer voids the key at the service, and a
lookup of a key whose request is still being served waits for it or answers ``in_flight``
(asked again), so "nothing" stays true. Without a lookup, the undo is sent with what is
known, and the service must find the effect by the forward key (docs/http-contract.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.agent import INVALID_INPUT, Agent
from sas.task_models import StepCall, StepResult
from sas.task_types.services import HttpCall, UnsafeValue
from sas.task_types.sources import Forward


class HttpAgent(Agent):
    """Runs one service's ``HttpCall`` declarations, each registered as its own activity."""

    def activities(self, calls: Iterable[HttpCall]) -> list[Callable[..., Any]]:
        """One activity per declared call, under its name (``<service>.<action>``)."""
        return [self._activity(call) for call in calls]

    def _activity(self, declared: HttpCall) -> Callable[..., Any]:
        async def run(call: StepCall) -> StepResult:
            return await self.run(declared, call)

        run.__name__ = run.__qualname__ = declared.name.replace(".", "_")
        return activity.defn(name=declared.name)(run)

    async def run(self, declared: HttpCall, call: StepCall) -> StepResult:
        """One attempt of the declared call for ``call``'s step (or its undo)."""
        known = await self._forward_fields(declared, call) if call.compensation else {}
        if known is None:
            activity.logger.info(
                "%s: not sent, the service did nothing under %s (its lookup says so)", declared.name, call.target_key
            )
            return await self.nothing_to_undo(call)
        try:
            request = declared.request(call, known)
        except UnsafeValue as err:
            # The same on every attempt: the task's input (or an earlier answer) is at fault.
            raise ApplicationError(str(err), type=INVALID_INPUT, non_retryable=True) from None
        return await self.perform(
            call,
            request.path,
            request.body,
            method=request.method,
            query=request.query,
            headers=request.headers,
            picked=declared.picked,
        )

    async def _forward_fields(self, declared: HttpCall, call: StepCall) -> dict[str, Any] | None:
        """For an undo: its forward step's result, completed by the service's lookup when the
        forward answer never arrived; None when the lookup says nothing was done under the key."""
        wanted = [s.field for part in declared.sources().values() for s in part.values() if isinstance(s, Forward)]
        forward = call.forward_result
        if forward is not None and all(forward.get(name) is not None for name in wanted):
            return dict(forward)
        lookup = declared.service.lookup_path
        if lookup is None or not call.target_key:
            return dict(forward or {})  # nothing to ask: sent with what is known (found by the forward key)
        found = await self.look_up(call, declared.service)
        if found is None:
            return None
        fields = wanted or list(found)
        if all(found.get(name) is None for name in fields):
            return None  # the service did nothing under that key: nothing to undo
        return {**found, **{k: v for k, v in (forward or {}).items() if v is not None}}
