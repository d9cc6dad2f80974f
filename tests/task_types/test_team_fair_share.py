"""A team named on its task type, and the fair share its tasks are started with: the fairness key
(the team, or a tenant field of the input under it), the team's weight from its setting, and the
priority kept as given."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.common import Priority

from sas.client.priorities import fair_priority, share_of
from sas.settings import Settings
from sas.settings.teams import TeamSettings
from sas.task_types.task_definition import MAX_FAIRNESS_KEY, TaskDefinition
from sas_orders.models import OrderInput
from sas_orders.workflows import ORDER


def order_type(**fields: Any) -> TaskDefinition:
    return TaskDefinition("fair_order", OrderInput, ORDER.stages, **fields)


def test_a_type_without_a_team_carries_no_fairness_key() -> None:
    assert order_type().fairness_key({"customer_id": "c-1"}) is None
    assert order_type(fairness_from="customer_id").fairness_key({"customer_id": ""}) is None


def test_the_key_is_the_team_or_its_tenant_under_it() -> None:
    assert order_type(team="payments").fairness_key({"customer_id": "c-1"}) == "payments"
    tenant = order_type(team="payments", fairness_from="customer_id")
    assert tenant.fairness_key({"customer_id": "acme"}) == "payments/acme"
    assert tenant.fairness_key({"customer_id": ""}) == "payments"  # an empty tenant: the team's share
    assert order_type(fairness_from="customer_id").fairness_key({"customer_id": "acme"}) == "acme"


def test_a_long_tenant_is_cut_to_temporals_bound_and_kept_apart_by_a_digest() -> None:
    tenant = order_type(team="payments", fairness_from="customer_id")
    first, second = (tenant.fairness_key({"customer_id": "x" * 80 + end}) for end in "ab")
    assert first is not None and second is not None
    assert len(first.encode()) <= MAX_FAIRNESS_KEY and len(second.encode()) <= MAX_FAIRNESS_KEY
    assert first.startswith("payments/xxx") and first != second


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"team": "Payments"}, "team 'Payments': use 1-40 characters"),
        ({"team": "p" * 41}, "use 1-40 characters"),
        ({"fairness_from": "tenant"}, "fairness_from 'tenant' is not a field of OrderInput"),
    ],
)
def test_a_bad_team_or_tenant_field_is_refused_when_declared(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        order_type(**fields)


def test_a_teams_weight_is_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAS_TEAMS__PAYMENTS__WEIGHT", "3")
    assert Settings().teams == {"payments": TeamSettings(weight=3.0)}
    monkeypatch.setenv("SAS_TEAMS__PAYMENTS__WEIGHT", "0")
    with pytest.raises(ValueError, match=r"teams\.payments\.weight"):
        Settings()
    monkeypatch.setenv("SAS_TEAMS__PAYMENTS__WEIGHT", "1")
    monkeypatch.setenv("SAS_TEAMS__PAY-MENTS__WEIGHT", "1")
    with pytest.raises(ValueError, match="team 'pay-ments'"):
        Settings()


def test_a_start_carries_the_key_and_weight_and_keeps_its_priority() -> None:
    # The order example names no team: its share is the one the start was given.
    given = Priority(priority_key=2, fairness_key="earlier", fairness_weight=5.0)
    assert fair_priority(given, "OrderWorkflow", {"customer_id": "c"}, {}) == given
    assert share_of("NoSuchWorkflow", {}, {}).fairness_key is None


def test_a_registered_teams_start_carries_its_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    from sas.client import priorities

    class Registered:
        definition = order_type(team="payments")

    monkeypatch.setattr(priorities, "by_workflow_name", lambda name: Registered())
    teams = {"payments": TeamSettings(weight=3.0)}
    assert fair_priority(Priority(priority_key=1), "FairOrder", {}, teams) == Priority(
        priority_key=1, fairness_key="payments", fairness_weight=3.0
    )
    # A team with no weight set takes the server's default, whatever the start said.
    assert fair_priority(Priority(fairness_weight=9.0), "FairOrder", {}, {}) == Priority(fairness_key="payments")
