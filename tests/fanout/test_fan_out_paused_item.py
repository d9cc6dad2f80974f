"""One fan-out item paused with Temporal's own tools (`temporal activity pause` on its batch's
pending payment, as an operator would from the CLI or the UI): it holds its batch, and the
batch its step, so the step is listed as parked, with the alert a paused step gets; `sas retry`
unpauses it and the payroll finishes; `sas compensate` reaches it, and every payment is refunded.
The step has a complete-by of its own (its waves' attempts), so a held fan-out is seen overdue
even when no quiet-task check looks at it. And `sas status` counts the items as they end, not
once their wave has."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import PauseActivityRequest
from temporalio.client import Client

from bench._payroll_service import Ledger
from sas.settings import SupervisorSettings
from sas.task_models import StepPolicyValues, TaskResult, TaskState
from tests.cli.test_cli import as_json, sas
from tests.fanout.test_fan_out_e2e import payroll, payroll_stack, payroll_type, recipients  # noqa: F401 - fixtures
from tests.fanout.test_fan_out_forged_item import pending_payment
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

pytestmark = pytest.mark.slow


def supervisor(*, quiet_after_s: float) -> SupervisorSettings:
    """The tests' fast ladder; a task is looked at as quiet after ``quiet_after_s``."""
    return SupervisorSettings(
        interval_s=0.5, failure_threshold=3, overdue_grace_s=1.5, cooldown_tries=0,
        orphan_after_s=quiet_after_s, orphan_check_s=min(quiet_after_s, 1.0),
        workflow_id=f"supervisor-{fresh_id('paused-item')}",
    )  # fmt: skip


@asynccontextmanager
async def held_payroll(
    served: tuple[str, Ledger], client: Client, temporal_address: str, services: Any, db: str, **overrides: Any
) -> AsyncIterator[tuple[Stack, Ledger]]:
    url, ledger = served
    async with payroll_stack(url, client, temporal_address, services, db, **overrides) as stack:
        try:
            yield stack, ledger
        finally:
            ledger.released.set()  # the held payment lets the service's handler end


async def pause_hang0(stack: Stack, ledger: Ledger, task_id: str) -> str:
    """Pause hang0's payment in its batch, as `temporal activity pause` does; its batch's id."""
    await wait_until(lambda: _holding(ledger), bool, what="hang0's payment held at the service")
    found = await wait_until(lambda: pending_payment(stack.client, task_id), bool, what="hang0 pending")
    assert found is not None
    batch, activity_id = found
    await stack.client.workflow_service.pause_activity(
        PauseActivityRequest(
            namespace=stack.client.namespace,
            execution=WorkflowExecution(workflow_id=batch),
            identity="mallory@laptop",
            id=activity_id,
            reason="looked stuck",
        )
    )
    return batch


async def parked_with_alert(stack: Stack, task_id: str, timeout: float = 60) -> Any:
    """Wait until the task is listed as parked (Error) for the paused item; its alert."""
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Error", timeout=timeout, what="parked")
    assert (await stack.step_states(task_id))["pay"] == "Error"
    [alert] = [a for a in await stack.alerts(task_id) if a.kind == "paused_outside_sas"]
    assert "paused in Temporal by mallory@laptop (looked stuck), not with `sas park`" in alert.message
    assert f"`sas retry {task_id}` unpauses it" in alert.suggested_action
    listed = as_json(await sas(stack, "list", "--state", "error", "--json"))
    assert task_id in [t["task_id"] for t in listed]
    return alert


def payday() -> dict[str, Any]:
    payload = recipients(10)
    payload["recipients"][3]["id"] = "hang0"
    return payload


async def test_a_paused_item_parks_its_step_with_an_alert_and_sas_retry_unpauses_it(
    payroll_type: None,  # noqa: F811
    payroll: tuple[str, Ledger],  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    payload = payday()
    async with held_payroll(
        payroll, client, temporal_address, services, sqlite_url, supervisor_settings=supervisor(quiet_after_s=1)
    ) as (stack, ledger):
        task_id = fresh_id("payroll-paused")
        handle = await stack.submit(task_id, payload, "PayrollRunWorkflow")
        batch = await pause_hang0(stack, ledger, task_id)

        alert = await parked_with_alert(stack, task_id)
        assert "item activity payroll.pay (activity" in alert.message and batch in alert.message

        ledger.released.set()  # the held payment lands while the item is paused
        resumed = await sas(stack, "retry", task_id, "--by", "carol", "--reason", "not stuck")
        assert resumed.returncode == 0, resumed.stderr
        assert "1 paused items unpaused" in resumed.stdout
        result: TaskResult = await handle.result()

    assert result.state == TaskState.PROCESSED
    assert result.steps[0].result == {"items": 10, "tolerance": 3, "failed_items": 0, "tolerated": 3, "processed": 10}
    # The unpaused attempt sent hang0's key again: the service answered it from its record.
    assert Counter(who for action, who in ledger.entries if action == "pay") == Counter(
        r["id"] for r in payload["recipients"]
    )


async def test_sas_compensate_reaches_a_paused_item_and_every_payment_is_refunded(
    payroll_type: None,  # noqa: F811
    payroll: tuple[str, Ledger],  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    async with held_payroll(
        payroll, client, temporal_address, services, sqlite_url, supervisor_settings=supervisor(quiet_after_s=1)
    ) as (stack, ledger):
        task_id = fresh_id("payroll-paused-undo")
        handle = await stack.submit(task_id, payday(), "PayrollRunWorkflow")
        await pause_hang0(stack, ledger, task_id)
        await parked_with_alert(stack, task_id)

        ledger.released.set()
        undone = await sas(stack, "compensate", task_id, "--by", "carol", "--reason", "payday moved")
        assert undone.returncode == 0, undone.stderr
        assert "1 paused fan-out items unpaused" in undone.stdout
        result: TaskResult = await handle.result()

    assert result.state == TaskState.COMPENSATED
    paid = Counter(who for action, who in ledger.entries if action == "pay")
    refunded = Counter(who for action, who in ledger.entries if action == "refund")
    assert paid == refunded and "hang0" in paid and set(paid.values()) == {1}, ledger.entries


async def test_a_fan_out_has_a_complete_by_and_overrunning_it_with_a_paused_item_parks_it(
    payroll_type: None,  # noqa: F811
    payroll: tuple[str, Ledger],  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    """No quiet-task check here (a task is quiet after an hour): the step's own complete-by is
    what brings the Supervisor to it. The wide payroll's: one wave of one round of 2 attempts
    of 4 s (0.2 s apart), then its one tolerated failure's undo, 3 tries of 1 attempt of 1 s
    with 2 s and 4 s between: 8.2 + 9 s."""
    undo = StepPolicyValues(complete_by_s=1.0, max_attempts=1, initial_interval_s=0.2, max_interval_s=0.5)
    payload = recipients(4)
    payload["recipients"][1]["id"] = "hang0"
    async with held_payroll(
        payroll,
        client,
        temporal_address,
        services,
        sqlite_url,
        supervisor_settings=supervisor(quiet_after_s=3600),
        compensation=undo,
    ) as (stack, ledger):
        task_id = fresh_id("payroll-overdue")
        handle = await stack.submit(task_id, payload, "PayrollWideWorkflow")
        await wait_until(lambda: _holding(ledger), bool, what="hang0's payment held at the service")
        record = await stack.record(task_id)
        assert record is not None
        row = next(s for s in record.steps if s.name == "pay")
        assert row.state == "Processing" and row.complete_by is not None
        assert 17.0 <= (row.complete_by - row.updated_at).total_seconds() <= 17.5, (row.complete_by, row.updated_at)

        await pause_hang0(stack, ledger, task_id)
        alert = await parked_with_alert(stack, task_id, timeout=45)
        assert "step pay's" in alert.message

        ledger.released.set()
        resumed = await sas(stack, "retry", task_id, "--by", "carol", "--reason", "not stuck")
        assert resumed.returncode == 0, resumed.stderr
        assert (await handle.result()).state == TaskState.PROCESSED


async def test_sas_status_counts_the_items_as_they_end(
    payroll_type: None,  # noqa: F811
    payroll: tuple[str, Ledger],  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    """One batch of 10: 9 paid while hang0 is held; the wave has not ended, its counts have moved."""
    async with held_payroll(payroll, client, temporal_address, services, sqlite_url) as (stack, ledger):
        task_id = fresh_id("payroll-counts")
        handle = await stack.submit(task_id, payday(), "PayrollRunWorkflow")

        async def paid() -> int:
            return sum(1 for action, _ in ledger.entries if action == "pay")

        await wait_until(paid, lambda n: n == 9, what="all but hang0 paid")
        await wait_until(lambda: _holding(ledger), bool, what="hang0's payment held at the service")

        async def pay_step() -> dict[str, Any]:
            shown = as_json(await sas(stack, "status", task_id, "--json"))
            return next(s for s in shown["steps"] if s["name"] == "pay")

        # The batch's last answer may still be on its way to the worker that answers the query.
        pay = await wait_until(pay_step, lambda s: s["result"].get("processed") == 9, what="9 counted processed")
        assert pay["state"] == "Processing"
        assert pay["result"] == {
            "items": 10,
            "tolerance": 3,
            "failed_items": 0,
            "tolerated": 3,
            "processing": 1,
            "processed": 9,
        }
        assert pay["note"] == "10 items: 1 processing, 9 processed (3 may fail)"

        ledger.released.set()
        result: TaskResult = await handle.result()
    assert result.state == TaskState.PROCESSED


async def _holding(ledger: Ledger) -> bool:
    return "hang0" in ledger.holding
