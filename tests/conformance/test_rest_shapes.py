"""The kit sends a REST-shaped call's declared query and headers, and reads its result where
``pick`` says it is, as sas's HTTP Agent does: a small holds service that refuses a request
without them, and nests its answer, passes every clause it can be driven through."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import sas.conformance.kit
from sas.api import (
    Const,
    Forward,
    HttpCall,
    Input,
    Service,
    StepDefinition,
    StepResultModel,
    TaskDefinition,
    TaskId,
    TaskInput,
)
from sas.api.contract import Verdict, assert_conforms, check_service
from sas.task_types.discovery import Catalog, FoundType
from tests.conformance.serving import serving

HOLDS = Service("kit_holds", lookup="/holds/lookup")


class HoldInput(TaskInput):
    account: str
    cents: int


class Held(StepResultModel):
    hold_id: str


class Released(StepResultModel):
    released: bool


HOLD = HttpCall(
    HOLDS,
    "POST",
    "/accounts/{account}/holds",
    params={"account": Input("account")},
    query={"currency": Const("EUR")},
    headers={"X-Order": TaskId()},
    body={"cents": Input("cents")},
    pick={"hold_id": "data.hold.id"},
    result=Held,
    action="hold",
)
RELEASE = HttpCall(
    HOLDS, "DELETE", "/holds/{hold_id}", params={"hold_id": Forward("hold_id")}, result=Released, action="release"
)


def holds_app() -> Starlette:
    answers: dict[str, dict[str, Any]] = {}
    made: dict[str, str] = {}  # hold id -> its key
    voided: set[str] = set()

    async def hold(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        order = request.headers.get("X-Order", "")
        if request.query_params.get("currency") != "EUR" or not order.startswith("sas-check-"):
            return JSONResponse({"error": "bad_request", "message": "currency and X-Order"}, status_code=400)
        if key in answers:
            return JSONResponse(answers[key])
        if key in voided:
            return JSONResponse({"error": "voided", "message": "looked up as nothing"}, status_code=409)
        hold_id = f"h_{uuid.uuid4().hex[:8]}"
        made[hold_id] = key
        answers[key] = {"data": {"hold": {"id": hold_id, "account": request.path_params["account"]}}}
        return JSONResponse(answers[key])

    async def release(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        if made.get(request.path_params["hold_id"]) != key.removesuffix(":undo"):
            return JSONResponse({"error": "unknown", "message": "no such hold"}, status_code=404)
        return JSONResponse({"released": True})

    async def lookup(request: Request) -> Response:
        key = request.query_params["idempotency_key"]
        found = answers.get(key)
        if found is None:
            voided.add(key)
            return JSONResponse({"hold_id": None})
        return JSONResponse({"hold_id": found["data"]["hold"]["id"]})

    async def root(_: Request) -> Response:
        return JSONResponse({})

    return Starlette(
        routes=[
            Route("/", root),
            Route("/holds/lookup", lookup, methods=["GET"]),
            Route("/accounts/{account}/holds", hold, methods=["POST"]),
            Route("/holds/{hold_id}", release, methods=["DELETE"]),
        ]
    )


@pytest.fixture(scope="module")
def holds_url() -> Iterator[str]:
    with serving(holds_app()) as url:
        yield url


async def test_query_headers_and_a_picked_result_are_sent_and_read_as_the_agent_does(
    holds_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    definition = TaskDefinition("kit_hold", HoldInput, (StepDefinition("hold", forward=HOLD, undo=RELEASE),))
    catalog = Catalog(
        types={"kit_hold": FoundType(definition=definition, workflow=object, module=__name__)},
        services={HOLDS.name: HOLDS},
        agents={HOLD.name: HOLD, RELEASE.name: RELEASE},
        sources=(),
    )
    monkeypatch.setattr(sas.conformance.kit, "_catalog", lambda: catalog)
    report = await check_service("kit_holds", holds_url, sample_input={"account": "acc-7", "cents": 500})
    verdicts = {r.clause.value: r.verdict for r in report.results}
    assert verdicts == {
        **dict.fromkeys(verdicts, Verdict.PASS),
        "refusal": Verdict.NOT_EXERCISED,
        "in-flight": Verdict.NOT_EXERCISED,
    }, report.lines()
    assert_conforms(report)
    # The lookup names the hold the picked result names.
    done = next(r for r in report.results if r.clause.value == "lookup-done")
    assert done.detail.startswith("named {'hold_id': 'h_")
