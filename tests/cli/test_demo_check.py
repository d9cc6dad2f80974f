"""The demo's ledger check (``sas.cli.demo_plan.check_ledger``), which ``sas demo`` and its test
trust to say "every order ended where its faults put it": a good ledger passes, and each bad one
is named. The forward and undo actions are the order demo's plan's (``sas_orders.demo``). Data
made here, no stack."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sas.cli.demo_plan import check_ledger as check
from sas_orders.demo import CASES, UNDO_ACTIONS


def check_ledger(expected: str, entries: list[dict[str, Any]], undo: Mapping[str, str] = UNDO_ACTIONS) -> list[str]:
    return check(expected, entries, undo)


def effect(action: str, key: str | None = None, target: str | None = None) -> dict[str, Any]:
    return {"action": action, "idempotency_key": key or f"o-1:{action}", "target_key": target}


COMPLETED = [effect("reserve"), effect("charge"), effect("ship")]
UNDONE_AFTER_CHARGE = [
    effect("reserve"),
    effect("charge"),
    effect("refund", target="o-1:charge"),
    effect("release", target="o-1:reserve"),
]


def test_good_ledgers_pass() -> None:
    assert check_ledger("Processed", COMPLETED) == []
    assert check_ledger("Compensated", UNDONE_AFTER_CHARGE) == []
    assert check_ledger("Compensated", []) == []  # refused at the first step: nothing to undo
    assert check_ledger("Error", [effect("reserve"), effect("charge")]) == []  # parked: the operator decides


def test_a_completed_order_missing_an_effect_or_with_an_undo_fails() -> None:
    assert check_ledger("Processed", COMPLETED[:2]) == ["completed but no ship in the ledger"]
    assert check_ledger("Processed", [*COMPLETED, effect("refund", target="o-1:charge")]) == [
        "completed yet something was undone"
    ]


def test_a_compensated_order_with_an_effect_not_undone_fails() -> None:
    charge_kept = [e for e in UNDONE_AFTER_CHARGE if e["action"] != "refund"]
    [problem] = check_ledger("Compensated", charge_kept)
    assert problem == "compensated but charge was never undone (no refund in the ledger)", problem
    shipped = [*UNDONE_AFTER_CHARGE, effect("ship")]
    [problem] = check_ledger("Compensated", shipped)
    assert problem == "compensated but ship was never undone (no cancel in the ledger)", problem


def test_two_effects_under_one_key_fail_whatever_the_end() -> None:
    twice = [*COMPLETED, effect("charge")]
    assert check_ledger("Processed", twice) == ["duplicate effect for one idempotency key"]
    assert check_ledger("Error", [effect("reserve"), effect("reserve")]) == ["duplicate effect for one idempotency key"]


def test_every_demo_case_expects_a_state_the_check_knows() -> None:
    assert {case.expected for case in CASES} == {"Processed", "Compensated", "Error"}


def test_a_plan_without_undo_actions_checks_only_duplicates() -> None:
    assert check_ledger("Processed", [effect("anything")], {}) == []
    assert check_ledger("Processed", [effect("a"), effect("a")], {}) == ["duplicate effect for one idempotency key"]
