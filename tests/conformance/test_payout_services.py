"""The kit against the payout example's REST-shaped calls (``sas_payout.services``, in their own
process): the runs desk's ``PUT /runs/{run_id}`` (undone by ``DELETE /runs/{run_id}``) and the
bank's ``POST /payees/{payee_id}/payments`` (undone by ``DELETE /payments/{payment_id}``), each
derived from the payout task type and sent as sas's HTTP Agent sends it; the same bank broken
(a key it ignores, a lookup that voids nothing) fails the clause it breaks, by name."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import sas.conformance.kit
from sas.api import HttpCall, Input, Result, Service, StepDefinition, StepResultModel, TaskDefinition, TaskInput
from sas.api.contract import ServiceCheckError, SlowCall, Verdict, assert_conforms, check_service
from sas.task_types.discovery import Catalog, FoundType
from sas_payout.services import Ledger, create_app
from tests.conformance.serving import serving

PAYOUT = {"currency": "EUR", "recipients": [{"payee_id": "emp-0001", "amount_cents": 1250}]}


async def slow_payout_call(call: SlowCall) -> None:
    """The payout services' fault API: a latency for the forward under the check's key."""
    rule = {"endpoint": call.call, "kind": "latency", "latency_ms": int(call.seconds * 1000), "run": call.key}
    async with httpx.AsyncClient() as http:
        (await http.post(f"{call.url}/admin/faults", json=rule)).raise_for_status()


@pytest.mark.parametrize(
    ("name", "refusing", "calls"),
    [
        (
            "payout_bank",
            {"recipients": [{"payee_id": "blocked-0001", "amount_cents": 1250}]},
            "payout_bank.pay: POST /payees/{payee_id}/payments, undo DELETE /payments/{payment_id},"
            " lookup /payments/lookup",
        ),
        (
            "payout_runs",
            {"currency": "JPY"},
            "payout_runs.validate: PUT /runs/{run_id}, undo DELETE /runs/{run_id}, lookup /runs/lookup",
        ),
    ],
)
async def test_the_rest_calls_are_derived_and_pass_clause_by_clause(
    payout_services: str, name: str, refusing: dict[str, Any], calls: str
) -> None:
    report = await check_service(
        name, payout_services, sample_input=PAYOUT, refusing=refusing, slow_forward=slow_payout_call
    )
    assert report.calls == [calls]
    assert len(report.results) == 8
    assert {r.verdict for r in report.results} == {Verdict.PASS}, report.lines()
    assert_conforms(report)
    details = {r.clause.value: r.detail for r in report.results}
    # The undo that names the effect in its path was sent for the effect the forward made.
    assert details["undo-nothing"].startswith("an unused key is looked up, not undone; the undo of {")
    assert details["in-flight"].startswith("waited for the forward and named its effect")


async def test_a_payment_is_made_once_at_its_payee_s_path(payout_services: str) -> None:
    payee = f"emp-{uuid.uuid4().hex[:8]}"
    sample = {"currency": "EUR", "recipients": [{"payee_id": payee, "amount_cents": 700}]}
    report = await check_service("payout_bank", payout_services, sample_input=sample)
    replay = next(r for r in report.results if r.clause.value == "replay")
    assert replay.verdict is Verdict.PASS, report.lines()
    # The key is an item's, as a fan-out's: <task>:pay:<payee>.
    key = re.search(r"under (sas-check-[0-9a-f]+):pay:" + re.escape(payee), replay.detail)
    assert key is not None, replay.detail
    async with httpx.AsyncClient() as http:
        ledger = (await http.get(f"{payout_services}/ledger", params={"run": key.group(1)})).json()
    paid = [e for e in ledger["entries"] if e["action"] == "payout_bank.pay"]
    assert [(e["payee_id"], e["amount_cents"], e["currency"]) for e in paid] == [(payee, 700, "EUR")]


def broken(ledger: Ledger, mode: str) -> Any:
    """The payout services broken one way: ``ignores-key`` makes a new payment for every
    request (the Idempotency-Key of a payment is replaced by a fresh one); ``lookup-voids-nothing``
    forgets the keys its lookup said nothing of."""
    app = create_app(ledger)

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if mode == "ignores-key" and scope["type"] == "http" and path.startswith("/payees/"):
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"idempotency-key"]
            headers.append((b"idempotency-key", f"ignored-{uuid.uuid4().hex}".encode()))
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)
        if mode == "lookup-voids-nothing" and path == "/payments/lookup":
            ledger.voided.clear()

    return wrapped


@pytest.fixture(scope="module")
def broken_banks() -> Iterator[dict[str, str]]:
    with serving(broken(Ledger(), "ignores-key")) as ignores, serving(broken(Ledger(), "lookup-voids-nothing")) as lax:
        yield {"ignores-key": ignores, "lookup-voids-nothing": lax}


@pytest.mark.parametrize(
    ("mode", "clause"),
    [("ignores-key", "replay"), ("lookup-voids-nothing", "lookup-nothing"), ("lookup-voids-nothing", "undo-first")],
)
async def test_a_broken_bank_fails_the_clause_it_breaks(broken_banks: dict[str, str], mode: str, clause: str) -> None:
    report = await check_service("payout_bank", broken_banks[mode], sample_input=PAYOUT)
    assert {r.clause.value: r.verdict for r in report.results}[clause] is Verdict.FAIL, report.lines()
    with pytest.raises(AssertionError, match=f"payout_bank.pay {clause}: "):
        assert_conforms(report)


class DeskInput(TaskInput):
    subject: str


class Opened(StepResultModel):
    ticket_id: str


class Closed(StepResultModel):
    closed: bool


async def test_a_path_parameter_from_an_earlier_step_s_result_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    desk = Service("kit_desk")
    opened = HttpCall(desk, "POST", "/tickets", body={"subject": Input("subject")}, result=Opened, action="open")
    close = HttpCall(
        desk,
        "PUT",
        "/tickets/{ticket_id}/closed",
        params={"ticket_id": Result("open", "ticket_id")},
        result=Closed,
        action="close",
    )
    definition = TaskDefinition(
        "kit_desk_ticket", DeskInput, (StepDefinition("open", forward=opened), StepDefinition("close", forward=close))
    )
    found = FoundType(definition=definition, workflow=object, module=__name__)
    catalog = Catalog(
        types={"kit_desk_ticket": found},
        services={"kit_desk": desk},
        agents={opened.name: opened, close.name: close},
        sources=(),
    )
    monkeypatch.setattr(sas.conformance.kit, "_catalog", lambda: catalog)
    with pytest.raises(ServiceCheckError) as refused:
        await check_service("kit_desk", "http://127.0.0.1:9", sample_input={"subject": "printer"})
    said = str(refused.value)
    assert "\n" not in said
    assert said.startswith("kit_desk.close: params 'ticket_id' is step open's ticket_id")
    assert "--forward PATH --body-json JSON" in said
