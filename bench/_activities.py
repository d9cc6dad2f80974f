"""Activities of the bench-only workflows: the three remote calls (plain httpx with an
Idempotency-Key, no state store) and the mirror writes of designs (a) and (c), made with
sas's own hot-path writer (``sas.state_store.agent_writes``) so the database work is the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.state_store.agent_writes.writer import StepWriter
from sas.task_models import AcceptOutcome, StepPlan, StepPolicyValues, StepTransition, TaskAccepted
from sas.task_models.versions import version_of

_BODIES = {
    "reserve": ("/inventory/reserve", ("sku", "quantity")),
    "charge": ("/payment/charge", ("amount_cents", "currency", "card")),
    "ship": ("/shipping/ship", ("address",)),
}
_DEFAULTS = {"currency": "EUR", "card": "4242424242424242"}
_AGENTS = {"reserve": "inventory.reserve", "charge": "payment.charge", "ship": "shipping.ship"}


class BenchActivities:
    def __init__(
        self,
        http: httpx.AsyncClient,
        services_url: str,
        sessions: async_sessionmaker[AsyncSession] | None,
        identity: str,
        task_queue: str,
        writer: StepWriter | None = None,
    ) -> None:
        self._http = http
        self._url = services_url.rstrip("/")
        self._sessions = sessions
        self._writer = writer  # acceptance is written as sas writes it (state_store.agent_writes)
        self._identity = identity
        self._task_queue = task_queue

    async def _post(self, step: str, call: dict[str, Any]) -> dict[str, Any]:
        path, fields = _BODIES[step]
        payload = {**_DEFAULTS, **call["payload"]}
        body = {"order_id": call["task_id"], **{f: payload[f] for f in fields}}
        try:
            response = await self._http.post(
                f"{self._url}{path}", json=body, headers={"Idempotency-Key": call["key"]}, timeout=10.0
            )
        except httpx.TransportError as err:
            raise ApplicationError(f"{path} unreachable: {err}", type="RemoteTransient") from err
        if response.status_code >= 500:
            raise ApplicationError(f"{path} answered {response.status_code}", type="RemoteTransient")
        if response.status_code >= 400:
            raise ApplicationError(f"{path} rejected: {response.text}", type="RemoteRejected", non_retryable=True)
        return response.json()

    @activity.defn(name="bench.reserve")
    async def reserve(self, call: dict[str, Any]) -> dict[str, Any]:
        return await self._post("reserve", call)

    @activity.defn(name="bench.charge")
    async def charge(self, call: dict[str, Any]) -> dict[str, Any]:
        return await self._post("charge", call)

    @activity.defn(name="bench.ship")
    async def ship(self, call: dict[str, Any]) -> dict[str, Any]:
        return await self._post("ship", call)

    # -- mirror writes (designs a and c)
    @activity.defn(name="bench.mirror_accept")
    async def mirror_accept(self, accepted: dict[str, Any]) -> None:
        assert self._writer is not None
        await accept(
            self._writer,
            accepted["task_id"],
            accepted["payload"],
            datetime.fromisoformat(accepted["at"]),
            workflow_type=activity.info().workflow_type or "",
            task_queue=self._task_queue,
        )
        if accepted.get("then"):
            await self.mirror_record(accepted["then"])

    @activity.defn(name="bench.mirror_record")
    async def mirror_record(self, transitions: list[dict[str, Any]]) -> int:
        assert self._writer is not None
        for t in transitions:  # on sas's hot-path writer, so the designs differ only in where they write
            await self._writer.write(transition(t, self._identity))
        return len(transitions)

    def all(self) -> list[Any]:
        return [self.reserve, self.charge, self.ship, self.mirror_accept, self.mirror_record]


async def accept(
    writer: StepWriter, task_id: str, payload: dict[str, Any], at: datetime, workflow_type: str, task_queue: str
) -> AcceptOutcome:
    steps = [
        StepPlan(name=name, position=i, agent=agent, idempotency_key=f"{task_id}:{name}", policy=StepPolicyValues())
        for i, (name, agent) in enumerate(_AGENTS.items())
    ]
    return await writer.accept(
        TaskAccepted(
            task_id=task_id,
            task_type="order",
            workflow_type=workflow_type,
            task_queue=task_queue,
            payload=payload,
            steps=steps,
            accepted_at=at,
        )
    )


def transition(t: dict[str, Any], identity: str) -> StepTransition:
    at = datetime.fromisoformat(t["at"]) if isinstance(t["at"], str) else t["at"]
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    processing = t["state"] == "Processing"
    return StepTransition(
        task_id=t["task_id"],
        step=t["step"],
        version=version_of(t["seq"]),
        state=t["state"],
        at=at,
        locked_by=identity if processing else None,
        complete_by=at + timedelta(seconds=10) if processing else None,
        task_state=t.get("task_state"),
    )
