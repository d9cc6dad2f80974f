"""Step results: each step's Agent returns its service's answer as the step's
result model; later steps and the step's own undo receive it; the state store, ``sas show``, the
``status`` query and the callbacks show it without its secret fields.

On the real services, whose undos require the service's own id of the effect (``ch_…``), as a
real payment provider's refund names the charge."""

from __future__ import annotations

import uuid

import httpx
from temporalio.client import WorkflowHandle

from sas.task_models import StepCall, TaskState, TaskStatus
from sas.task_models.results import secret_fields
from sas_orders.models import ChargeResult
from tests.cli.test_cli import as_json, sas
from tests.e2e.test_callbacks import Receiver, receiver  # noqa: F401 - the fixture, used by name
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


def _new_key() -> str:
    return f"k-{uuid.uuid4().hex}"


async def _post(http: httpx.AsyncClient, path: str, body: dict, key: str) -> httpx.Response:
    return await http.post(path, json=body, headers={"Idempotency-Key": key})


async def _fail_ship_and_wait(stack: Stack, task_id: str) -> WorkflowHandle:
    """An order whose shipping is refused: reserve and charge are undone."""
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
    )
    handle = await stack.submit(task_id)
    result = await handle.result()
    assert result.state == TaskState.COMPENSATED
    return handle


async def test_a_refund_names_the_charge_the_charge_step_got(stack_any_db: Stack) -> None:
    """Ship fails after the charge: the refund gets the charge step's result and the ledger shows
    the refund of exactly that charge (on SQLite and on PostgreSQL)."""
    stack = stack_any_db
    task_id = fresh_id("res-refund")
    handle = await _fail_ship_and_wait(stack, task_id)

    status = await handle.query("status", result_type=TaskStatus)
    results = {s.name: s.result for s in status.steps}
    charge_id = results["charge"]["charge_id"]
    assert charge_id.startswith("ch_") and results["reserve"]["reservation_id"].startswith("rsv_")
    assert results["ship"] is None  # it never went through
    assert "client_secret" not in results["charge"]  # marked Secret: never shown

    # The refund was handed its own forward result: the charge id came from there, not a lookup.
    refund_call = await _agent_input(stack, task_id, "payment.refund")
    assert refund_call.forward_result is not None and refund_call.forward_result["charge_id"] == charge_id

    ledger = await stack.ledger(task_id)
    charge = next(e for e in ledger if e["action"] == "charge")
    refund = next(e for e in ledger if e["action"] == "refund")
    release = next(e for e in ledger if e["action"] == "release")
    assert charge["provider_id"] == charge_id
    assert refund["target_id"] == charge_id and refund["amount_cents"] == charge["amount_cents"]
    assert release["target_id"] == results["reserve"]["reservation_id"]

    # The mirror keeps the same results, in the steps' result column, without the secret.
    record = await stack.record(task_id)
    assert record is not None
    stored = {s.name: s.result for s in record.steps}
    assert stored["charge"] == results["charge"] and stored["ship"] is None
    assert secret_fields(ChargeResult) == {"client_secret"}


async def test_the_service_refuses_a_refund_without_or_with_a_wrong_charge_id(stack: Stack) -> None:
    order_id = fresh_id("res-api")
    async with httpx.AsyncClient(base_url=stack.services_url) as http:
        charge_key = _new_key()
        charged = await _post(
            http,
            "/payment/charge",
            {"order_id": order_id, "amount_cents": 500, "currency": "EUR", "card": "4242424242424242"},
            charge_key,
        )
        assert charged.status_code == 200
        charge_id = charged.json()["charge_id"]

        without = await _post(http, "/payment/refund", {"order_id": order_id, "charge_key": charge_key}, _new_key())
        assert without.status_code == 422 and without.json()["error"] == "charge_id_required"
        unknown = await _post(
            http,
            "/payment/refund",
            {"order_id": order_id, "charge_key": charge_key, "charge_id": "ch_nosuchcharge"},
            _new_key(),
        )
        assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_charge_id"

        # Another order's real charge id is wrong for this one.
        other_key = _new_key()
        other = await _post(
            http,
            "/payment/charge",
            {"order_id": f"{order_id}-other", "amount_cents": 700, "currency": "EUR", "card": "4242424242424242"},
            other_key,
        )
        wrong = await _post(
            http,
            "/payment/refund",
            {"order_id": order_id, "charge_key": charge_key, "charge_id": other.json()["charge_id"]},
            _new_key(),
        )
        assert wrong.status_code == 422 and wrong.json()["error"] == "wrong_charge_id"
        assert [e["action"] for e in await stack.ledger(order_id)] == ["charge"]  # nothing refunded yet

        # Looked up by our key, as an undo whose forward answer was lost does.
        found = await http.get("/payment/lookup", params={"idempotency_key": charge_key})
        assert found.json() == {"charge_id": charge_id}

        refund_key = _new_key()
        body = {"order_id": order_id, "charge_key": charge_key, "charge_id": charge_id}
        refunded = await _post(http, "/payment/refund", body, refund_key)
        assert refunded.status_code == 200 and refunded.json()["refunded"] is True
        assert refunded.json()["refund_id"].startswith("re_")
        # Idempotent by our key as well: the same refund again is the same answer, no second effect.
        again = await _post(http, "/payment/refund", body, refund_key)
        assert again.json() == refunded.json() and again.headers.get("Idempotent-Replayed") == "true"
    entries = await stack.ledger(order_id)
    assert [(e["action"], e["target_id"]) for e in entries] == [("charge", None), ("refund", charge_id)]


async def test_results_are_in_sas_show_and_in_the_callbacks(stack: Stack, receiver) -> None:  # noqa: F811
    got, url = receiver
    task_id = fresh_id("res-show")
    result = await (await stack.submit(task_id, order(callback_url=url))).result()
    assert result.state == TaskState.PROCESSED
    charge_id = next(s.result for s in result.steps if s.name == "charge")["charge_id"]  # type: ignore[index]

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    by_step = {s["name"]: s["result"] for s in shown["steps"]}
    assert by_step["charge"]["charge_id"] == charge_id and "client_secret" not in by_step["charge"]
    assert by_step["ship"]["shipment_id"].startswith("shp_")
    table = await sas(stack, "show", task_id)
    assert table.returncode == 0 and f"charge_id={charge_id}" in table.stdout

    # The order's Agents read no earlier result (reads=()), so none is sent one: the charge's
    # client secret never reaches the shipping Agent, in its call or in the history holding it.
    ship_call = await _agent_input(stack, task_id, "shipping.ship")
    assert ship_call.results == {} and "client_secret" not in ship_call.model_dump_json()

    await wait_until(lambda: _kinds(got), lambda kinds: "completed" in kinds, timeout=30, what="the completed callback")
    completed = next(e for e in got.deliveries if e["kind"] == "completed")
    assert completed["results"]["charge"]["charge_id"] == charge_id
    assert set(completed["results"]) == {"reserve", "charge", "ship"}
    step_done = [e for e in got.deliveries if e["kind"] == "step_completed" and e["step"] == "charge"]
    assert step_done and step_done[0]["results"]["charge"]["charge_id"] == charge_id
    assert all("client_secret" not in e["results"].get("charge", {}) for e in got.deliveries)


async def _agent_input(stack: Stack, task_id: str, activity: str) -> StepCall:
    """What the Scheduler handed an Agent, from the workflow's history."""
    history = await stack.client.get_workflow_handle(task_id).fetch_history()
    for event in history.events:
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and scheduled.activity_type.name == activity:
            (call,) = await stack.client.data_converter.decode(scheduled.input.payloads, [StepCall])
            assert isinstance(call, StepCall)
            return call
    raise AssertionError(f"{activity} was never scheduled for {task_id}")


async def _kinds(got: Receiver) -> list[str]:
    return [e["kind"] for e in got.deliveries]


async def test_a_clean_up_without_the_result_finds_the_charge_by_our_key(stack: Stack) -> None:
    """A workflow terminated mid-saga is undone from the state store alone; its refund looks the
    charge id up by our charge key and refunds exactly that charge."""
    task_id = fresh_id("res-cleanup")
    await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=3000, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship running")
    await handle.terminate("test: terminated mid-saga")
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Compensated", timeout=90, what="the clean-up")
    ledger = await stack.ledger(task_id)
    charge = next(e for e in ledger if e["action"] == "charge")
    refunds = [e for e in ledger if e["action"] == "refund"]
    assert [r["target_id"] for r in refunds] == [charge["provider_id"]]


async def test_a_call_carries_the_input_as_given_and_the_agents_worker_fills_in_its_defaults(stack: Stack) -> None:
    # Started with the fields a dict gives only: the charge needs a currency and a card, the
    # input model's defaults, which its worker fills in (sas/runtime/whole_calls.py).
    task_id = fresh_id("res-given")
    given = order().model_dump(mode="json", exclude_unset=True)
    result = await (await stack.submit(task_id, given)).result()
    assert result.state == TaskState.PROCESSED
    charge_call = await _agent_input(stack, task_id, "payment.charge")
    assert charge_call.payload == given
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge", "ship"]
