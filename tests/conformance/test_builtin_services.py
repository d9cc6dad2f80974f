"""The kit against every one of the demo services (``sas_demo_services``), in their own
process, with their fault API slowing a forward for the in-flight race: each clause passes,
except the shipping service's refusal, which it has no business rule to give (not exercised)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sas.api.contract import ExplicitCalls, Verdict, assert_conforms, builtin_services_slowdown, check_service
from sas_demo_services import DECLINED_CARD, OUT_OF_STOCK_SKU, ServiceProcess, free_port, start_service_process

CALLS = {
    "inventory": ExplicitCalls(
        forward="/inventory/reserve",
        body={"order_id": "{task_id}", "sku": "SKU-1", "quantity": 1},
        undo="/inventory/release",
        undo_body={
            "order_id": "{task_id}",
            "reserve_key": "{forward_key}",
            "reservation_id": "{forward.reservation_id}",
        },
    ),
    "payment": ExplicitCalls(
        forward="/payment/charge",
        body={"order_id": "{task_id}", "amount_cents": 100, "currency": "EUR", "card": "4242424242424242"},
        undo="/payment/refund",
        undo_body={"order_id": "{task_id}", "charge_key": "{forward_key}", "charge_id": "{forward.charge_id}"},
    ),
    "shipping": ExplicitCalls(
        forward="/shipping/ship",
        body={"order_id": "{task_id}", "address": "1 Main St"},
        undo="/shipping/cancel",
        undo_body={"order_id": "{task_id}", "ship_key": "{forward_key}", "shipment_id": "{forward.shipment_id}"},
    ),
}
REFUSING = {"inventory": {"sku": OUT_OF_STOCK_SKU}, "payment": {"card": DECLINED_CARD}, "shipping": None}


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("conformance")
    with start_service_process(
        free_port(), str(folder / "ledger.db"), enable_faults=True, log_path=str(folder / "services.log")
    ) as process:
        yield process


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_each_built_in_service_meets_the_contract(services: ServiceProcess, name: str) -> None:
    assert services.admin_token is not None
    report = await check_service(
        name,
        services.url,
        calls=CALLS[name],
        refusing=REFUSING[name],
        slow_forward=builtin_services_slowdown(services.admin_token),
    )
    assert_conforms(report)
    verdicts = {r.clause.value: r.verdict for r in report.results}
    expected = dict.fromkeys(verdicts, Verdict.PASS)
    if REFUSING[name] is None:
        expected["refusal"] = Verdict.NOT_EXERCISED
    assert verdicts == expected, report.lines()
    # A result model's Secret fields (the charge's client_secret) are never shown.
    assert "_secret_" not in report.model_dump_json()
    if name == "payment":
        assert '"client_secret":"***"' in next(r.detail for r in report.results if r.clause.value == "replay")


async def test_a_wrong_admin_token_leaves_the_race_not_exercised(services: ServiceProcess) -> None:
    report = await check_service(
        "payment", services.url, calls=CALLS["payment"], slow_forward=builtin_services_slowdown("not-the-token")
    )
    race = next(r for r in report.results if r.clause.value == "in-flight")
    assert race.verdict is Verdict.NOT_EXERCISED
    assert "POST /admin/faults answered 401" in race.detail
