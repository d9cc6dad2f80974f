"""A fan-out end to end on a dev server, against a payroll service of the test's own: 30
recipients paid, each under its own key; a few refused within the tolerance (they are undone,
nothing was paid to them, and the task goes on); past it (every payment made is refunded, the
ledger exact); and the worker stopped mid-fan-out, a new one finishing with one payment each."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from bench._payroll_service import Ledger, payroll_service
from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.task_models import StepState, TaskResult, TaskState, TaskStatus
from sas.workflows import registry
from tests.helpers import fresh_id, serving, wait_until
from tests.stack import ADMIN_TOKEN, Stack, start_stack

pytestmark = pytest.mark.slow
HISTORIES = Path(__file__).resolve().parents[1] / "histories"


@pytest.fixture
def payroll_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "bench._payroll")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def payroll() -> AsyncIterator[tuple[str, Ledger]]:
    ledger = Ledger()
    async with serving(payroll_service(ledger), "the payroll service") as url:
        yield url, ledger


@asynccontextmanager
async def payroll_stack(
    url: str, client: Client, temporal_address: str, services: Any, db: str, **overrides: Any
) -> AsyncIterator[Stack]:
    where = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, payroll=ServiceSettings(url=url))  # type: ignore[call-arg]
    async with start_stack(client, temporal_address, services.url, db, services=where, **overrides) as stack:
        yield stack


def recipients(count: int, refused: int = 0, slow: int = 0) -> dict[str, Any]:
    special = [f"refuse{i}" for i in range(refused)] + [f"slow{i}" for i in range(slow)]
    ids = [f"r{i}" for i in range(count)]
    # The refused and slow ones spread through the list, so that they fall in different batches.
    step = count // max(len(special), 1)
    for n, who in enumerate(special):
        ids[n * step] = who
    return {"recipients": [{"id": who, "cents": 100 + n} for n, who in enumerate(ids)]}


async def test_refusals_within_the_tolerance_are_undone_and_the_task_goes_on(
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    payload = recipients(30, refused=2)
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        task_id = fresh_id("payroll")
        result: TaskResult = await (await stack.submit(task_id, payload, "PayrollRunWorkflow")).result()
        mirrored = await stack.record(task_id)
    assert result.state == TaskState.PROCESSED
    pay = next(s for s in result.steps if s.name == "pay")
    assert pay.result == {
        "items": 30,
        "tolerance": 3,
        "failed_items": 2,
        "tolerated": 3,
        "processed": 28,
        "compensated": 2,
    }
    assert [s.state for s in result.steps] == [StepState.PROCESSED, StepState.PROCESSED]
    # Nothing was paid to a refused recipient, so nothing was refunded; every other paid once.
    assert sorted(who for action, who in ledger.entries if action == "pay") == sorted(
        r["id"] for r in payload["recipients"] if not r["id"].startswith("refuse")
    )
    assert [e for e in ledger.entries if e[0] == "refund"] == []
    assert mirrored is not None
    row = next(s for s in mirrored.steps if s.name == "pay")
    assert row.state == StepState.PROCESSED and row.result == pay.result


async def test_refusals_past_the_tolerance_undo_every_payment(
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    payload = recipients(30, refused=5)
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        task_id = fresh_id("payroll-past")
        result: TaskResult = await (await stack.submit(task_id, payload, "PayrollRunWorkflow")).result()
    assert result.state == TaskState.COMPENSATED
    pay, report = result.steps
    assert pay.state == StepState.COMPENSATED and report.state == StepState.SKIPPED
    assert pay.error_type == "FanOutPastTolerance"
    paid = Counter(who for action, who in ledger.entries if action == "pay")
    refunded = Counter(who for action, who in ledger.entries if action == "refund")
    assert paid == refunded and set(paid.values()) == {1}  # each payment made once and refunded once
    assert not any(who.startswith("refuse") for who in paid)


async def test_a_worker_stopped_mid_fan_out_leaves_one_payment_per_recipient(
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    ledger.slow_s = 1.0
    payload = recipients(30, slow=12)
    task_id = fresh_id("payroll-crash")
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        handle = await stack.submit(task_id, payload, "PayrollRunWorkflow")

        async def paid_some() -> int:
            return len(ledger.entries)

        await wait_until(paid_some, lambda n: n >= 3, what="the first payments made")
        status = await handle.query("status", result_type=TaskStatus)
        assert status.steps[0].state == StepState.PROCESSING
        queues = stack.settings.temporal
    # The worker is gone mid-fan-out; another, on the same queues, takes the task where its history stands.
    async with payroll_stack(url, client, temporal_address, services, sqlite_url, temporal=queues) as stack:
        again = stack.client.get_workflow_handle(task_id, result_type=TaskResult)
        try:
            result: TaskResult = await asyncio.wait_for(again.result(), timeout=90)
        except TimeoutError:
            async for e in again.fetch_history_events():
                if e.HasField("workflow_task_failed_event_attributes"):
                    print("WFT FAILED", e.workflow_task_failed_event_attributes.failure.message[:2000])
            print("STATUS", await again.query("status", result_type=TaskStatus))
            raise
    assert result.state == TaskState.PROCESSED
    assert Counter(who for _, who in ledger.entries) == Counter(r["id"] for r in payload["recipients"])


# The fan-out's paths whose histories are kept in tests/histories/ (tests/replay replays them with
# the current code): the task's own history and its first batch's. The first two were recorded
# before batches answered in short (every item listed); fan_out_short_answers since.
FAN_OUT_HISTORIES = {
    "fan_out_within_tolerance": (12, 1),
    "fan_out_past_tolerance": (12, 5),
    "fan_out_short_answers": (12, 1),
}


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
@pytest.mark.parametrize("name", sorted(FAN_OUT_HISTORIES))
async def test_record(
    name: str,
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, _ = payroll
    count, refused = FAN_OUT_HISTORIES[name]
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        task_id = fresh_id(name.replace("_", "-"))
        handle = await stack.submit(task_id, recipients(count, refused=refused), "PayrollRunWorkflow")
        await handle.result()
        batches = [
            e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
            async for e in handle.fetch_history_events()
            if e.HasField("child_workflow_execution_started_event_attributes")
        ]
        first_batch = batches[0]
        for suffix, workflow_id in (("", task_id), ("_batch", first_batch)):
            history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
            text = json.dumps(json.loads(history.to_json()), indent=1) + "\n"
            (HISTORIES / f"{name}{suffix}.json").write_text(text)
