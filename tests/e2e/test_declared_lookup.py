"""A hand-written undo asks the lookup path its service declares, as the data-declared Agents do:
a pivot charge whose answer was lost (it landed after its attempt was cut off at complete-by),
then compensated by force, is refunded, found by ``Service(lookup="/payments/lookup")``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from sas.client.task_client import TaskClient
from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.task_models import StepState, TaskResult, TaskState
from sas.workflows import registry
from tests.helpers import fresh_id, serving, wait_until
from tests.stack import ADMIN_TOKEN, start_stack


class Billing:
    """The team's billing service, by the contract (docs/http-contract.md), REST paths under
    ``/payments``. A charge is held until the test lets it land, after its attempt has given up."""

    def __init__(self) -> None:
        self.ledger: list[tuple[str, str]] = []
        self.lookups: list[str] = []
        self.charges: dict[str, str] = {}
        self.land = asyncio.Event()

    def app(self) -> Starlette:
        async def charge(request: Request) -> Response:
            key = request.headers["Idempotency-Key"]
            if key not in self.charges:
                await self.land.wait()  # the Agent gave up on this answer long ago
                self.charges[key] = f"ch_{len(self.charges)}"
                self.ledger.append(("charge", self.charges[key]))
            return JSONResponse({"charge_id": self.charges[key]})

        async def refund(request: Request) -> Response:
            self.ledger.append(("refund", (await request.json())["charge_id"]))
            return JSONResponse({"refunded": True})

        async def lookup(request: Request) -> Response:
            self.lookups.append(request.url.path)
            found = self.charges.get(request.query_params["idempotency_key"])
            if found is None:
                return JSONResponse({"error": "not_found", "message": "nothing under that key"}, status_code=404)
            return JSONResponse({"charge_id": found})

        async def elsewhere(request: Request) -> Response:
            # Any other path is refused in the contract's JSON, as the team's REST framework does.
            self.lookups.append(request.url.path)
            return JSONResponse({"error": "not_found", "message": f"no route {request.url.path}"}, status_code=404)

        return Starlette(
            routes=[
                Route("/payments/charge", charge, methods=["POST"]),
                Route("/payments/refund", refund, methods=["POST"]),
                Route("/payments/lookup", lookup, methods=["GET"]),
                Route("/{path:path}", elsewhere, methods=["GET", "POST"]),
            ]
        )


@pytest.fixture
def gala_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.gala_billing")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def billing() -> AsyncIterator[tuple[str, Billing]]:
    service = Billing()
    async with serving(service.app(), "the billing service") as url:
        try:
            yield url, service
        finally:
            service.land.set()  # nothing stays held when the server stops


async def test_a_hand_written_refund_asks_the_declared_lookup_and_refunds_a_charge_whose_answer_was_lost(
    gala_type: None,
    billing: tuple[str, Billing],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, service = billing
    where = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, gala_billing=ServiceSettings(url=url))  # type: ignore[call-arg]
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, services=where
    ) as stack:
        task_id = fresh_id("gala")
        handle = await stack.submit(task_id, {"guest": "Ada", "amount_cents": 12_000}, "GalaWorkflow")
        await wait_until(
            lambda: stack.step_states(task_id),
            lambda s: s.get("charge") == StepState.FAILED,
            what="the charge cut off at its complete-by",
        )
        service.land.set()
        await wait_until(lambda: asyncio.sleep(0, service.ledger), bool, what="the charge landing late")

        tasks = TaskClient(stack.client, stack.settings)
        await tasks.compensate(task_id, by="ops", reason="the guest cancelled", force=True)
        result: TaskResult = await asyncio.wait_for(handle.result(), timeout=60)

    assert result.state == TaskState.COMPENSATED
    assert service.lookups == ["/payments/lookup"]
    assert service.ledger == [("charge", "ch_0"), ("refund", "ch_0")]
