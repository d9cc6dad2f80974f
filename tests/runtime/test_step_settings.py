"""A step's policy set for one task type (SAS_STEPS__<TYPE>__<STEP>__*) wins over the one set for
every step of its name (SAS_STEPS__<STEP>__*), which is kept as the fallback; a type or step that
is not registered stops the worker with one line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_settings import SettingsError
from temporalio.client import Client

from sas.activities import check_step_settings
from sas.settings import Settings
from sas.task_models import StepPolicyValues
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id
from tests.stack import start_stack


def test_a_types_own_step_setting_wins_and_the_bare_one_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAS_STEPS__ORDER__CHARGE__COMPLETE_BY_S", "20")
    monkeypatch.setenv("SAS_STEPS__CHARGE__COMPLETE_BY_S", "7")
    monkeypatch.setenv("SAS_STEPS__CHARGE__MAX_ATTEMPTS", "4")
    settings = Settings()
    order, trip = settings.step_override("order", "charge"), settings.step_override("trip", "charge")
    assert order is not None and order.complete_by_s == 20
    assert trip is not None and (trip.complete_by_s, trip.max_attempts) == (7, 4)
    assert settings.step_override("trip", "flight") is None


def test_a_name_may_be_both_a_step_and_a_task_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAS_STEPS__ORDER__COMPLETE_BY_S", "3")  # a step named order
    monkeypatch.setenv("SAS_STEPS__ORDER__SHIP__COMPLETE_BY_S", "30")  # the order type's ship
    settings = Settings()
    assert settings.steps["order"].complete_by_s == 3
    assert settings.steps["order.ship"].complete_by_s == 30


def test_a_step_setting_for_no_registered_type_or_step_stops_the_worker_in_one_line() -> None:
    with pytest.raises(SettingsError, match=r"^SAS_STEPS__ORDR__CHARGE__\*: no task type is named 'ordr'"):
        check_step_settings(Settings(steps={"ordr": {"charge": StepPolicyValues()}}))
    with pytest.raises(SettingsError, match=r"^SAS_STEPS__ORDER__CHARGES__\*: task type 'order' has no step 'charges'"):
        check_step_settings(Settings(steps={"order": {"charges": StepPolicyValues()}}))
    check_step_settings(Settings(steps={"order": {"charge": StepPolicyValues()}, "anything": StepPolicyValues()}))


async def test_the_accepted_plan_takes_the_types_own_policy(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    """Recorded in the history: the order's ship runs within its type's complete-by, the preorder's
    charge (the same name in another type) within the bare setting's."""
    steps = {
        "order": {"ship": StepPolicyValues(complete_by_s=41)},
        "charge": StepPolicyValues(complete_by_s=37),
    }
    async with start_stack(client, temporal_address, services.url, sqlite_url, steps=steps) as stack:
        task_id = fresh_id("per-type")
        await (await stack.submit(task_id)).result()
        timeouts = {
            e.activity_task_scheduled_event_attributes.activity_type.name: (
                e.activity_task_scheduled_event_attributes.start_to_close_timeout.ToTimedelta()
            )
            async for e in stack.client.get_workflow_handle(task_id).fetch_history_events()
            if e.HasField("activity_task_scheduled_event_attributes")
        }
    assert timeouts["shipping.ship"] == timedelta(seconds=41)
    assert timeouts["payment.charge"] == timedelta(seconds=37)
