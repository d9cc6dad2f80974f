"""An operator skips a failed step its task type declares skippable: the carrier refuses the
order's ship, the customer will collect it in store, and `sas skip` lets the order go on without
it. The Scheduler checks the type allows it, records the step Skipped with who and why, audits it,
and goes on; the shipping service is never called again; `--dry-run` changes nothing; a step its
type does not declare skippable is refused, and so is a skip past the pivot unless forced.
(While undoing it is refused too, and a skipped step is never undone: the core's rule,
tests/scheduler/test_core.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from sas.settings import get_settings
from sas.state_store.queries import audit_for
from sas.task_models import TaskResult, TaskState, TaskStatus
from sas.workflows import registry
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order, start_stack

REASON = "customer collects in store"


@pytest.fixture
def skip_kinds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.skip_kinds")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def skip_stack(
    skip_kinds: None,
    client: Client,
    temporal_address: str,
    services,  # type: ignore[no-untyped-def]
    sqlite_url: str,
) -> AsyncIterator[Stack]:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        yield stack


async def ship_refused(stack: Stack, task_id: str, workflow: str) -> None:
    """Submit an order whose ship the carrier refuses, and wait until ship waits for a decision."""
    fault = await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=task_id
    )
    handle = await stack.submit(task_id, order(), workflow)
    await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED and next(x for x in s.steps if x.name == "ship").state == "Failed",
        what="ship refused and waiting for a decision",
    )
    # From here a call to ship would go through and leave a shipment in the ledger.
    await stack.remove_fault(fault)


def skip(task_id: str, *more: str) -> list[str]:
    return ["skip", task_id, "--step", "ship", "--reason", REASON, *more]


async def test_a_skippable_step_skipped_lets_the_order_go_on_without_calling_it_again(skip_stack: Stack) -> None:
    stack = skip_stack
    task_id, plain = fresh_id("collect"), fresh_id("plain")
    await ship_refused(stack, task_id, "CollectableOrderWorkflow")

    # The dry run: the Scheduler's checks, nothing recorded, nothing changed.
    dry = await sas(stack, *skip(task_id, "--dry-run"))
    assert dry.returncode == 0, dry.stderr
    assert "would skip step ship (dry run: nothing changed)" in dry.stdout
    status = await stack.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
    assert status.state == TaskState.FAILED and status.steps[1].state == "Failed" and status.steps[2].runs == 0

    # The reserve waits for nothing; the plain order's ship is not declared skippable.
    idle = await sas(stack, "skip", task_id, "--step", "reserve", "--reason", REASON)
    assert idle.returncode != 0 and "step reserve is Processed" in idle.stderr, idle.stderr
    await ship_refused(stack, plain, "OrderWorkflow")
    refused = await sas(stack, *skip(plain))
    assert refused.returncode != 0, refused.stderr
    assert "step ship may not be skipped: its task type does not declare it skippable" in refused.stderr

    done = await sas(stack, *skip(task_id, "--by", "carol"))
    assert done.returncode == 0, done.stderr
    assert "skipping step ship" in done.stdout
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED
    states = {s.name: (s.state, s.runs) for s in result.steps}
    assert states == {"reserve": ("Processed", 1), "ship": ("Skipped", 1), "charge": ("Processed", 1)}
    # Never called again: the fault is gone, so a call would have shipped.
    effects = [(e["service"], e["action"]) for e in await stack.ledger(task_id)]
    assert ("shipping", "ship") not in effects and ("payment", "charge") in effects

    async with stack.sessions() as session:
        [entry] = [a for a in await audit_for(session, task_id) if a.action == "skip"]
    assert (entry.actor, entry.reason) == ("carol", REASON)
    assert entry.changed == "ship (Failed) skipped; its undo is not run"
    # The story: the step row and `sas show` say who skipped it and why; so do the task's events.
    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Processed"
    row = next(s for s in record.steps if s.name == "ship")
    assert row.state == "Skipped" and row.note == f"skipped by carol: {REASON}"
    shown = as_json(await sas(stack, "show", task_id, "--json"))
    assert next(s for s in shown["steps"] if s["name"] == "ship")["note"] == f"skipped by carol: {REASON}"
    assert any(a["action"] == "skip" and a["actor"] == "carol" for a in shown["operator_actions"])
    final = await stack.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
    assert any(f"ship: skip by carol: {REASON}" in e for e in final.events)
    metadata = await stack.client.get_workflow_handle(task_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    ship_line = next(line for line in metadata.current_details.splitlines() if line.startswith("- **ship**"))
    assert ship_line.startswith("- **ship**: Skipped · run 1") and f"skipped by carol: {REASON}" in ship_line


async def test_a_skipped_step_is_not_undone_when_the_task_is_compensated_later(skip_stack: Stack) -> None:
    stack = skip_stack
    task_id = fresh_id("collect-undo")
    await stack.add_fault(
        endpoint="payment.charge", kind="permanent", status=402, error="declined", match_order_id=task_id
    )
    await ship_refused(stack, task_id, "CollectableOrderWorkflow")
    assert (await sas(stack, *skip(task_id))).returncode == 0
    handle = stack.client.get_workflow_handle(task_id, result_type=TaskResult)
    await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED and s.steps[2].state == "Failed",
        what="the charge declined and waiting for a decision",
    )
    undo = await sas(stack, "compensate", task_id, "--reason", "card declined")
    assert undo.returncode == 0, undo.stderr
    result = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert {s.name: s.state for s in result.steps} == {
        "reserve": "Compensated",
        "ship": "Skipped",
        "charge": "Compensated",
    }
    # The reserve is released, nothing was shipped or charged, and ship stayed Skipped: its undo never ran.
    effects = [(e["service"], e["action"]) for e in await stack.ledger(task_id)]
    assert effects == [("inventory", "reserve"), ("inventory", "release")]


async def test_a_skip_past_the_pivot_is_refused_unless_forced(skip_stack: Stack) -> None:
    stack = skip_stack
    task_id = fresh_id("prepaid")
    await ship_refused(stack, task_id, "PrepaidOrderWorkflow")

    unforced = await sas(stack, *skip(task_id))
    assert unforced.returncode != 0, unforced.stderr
    assert "past the point of no return: step ship, after the pivot charge, has run" in unforced.stderr
    assert "to skip ship anyway: --force --reason WHY" in unforced.stderr

    forced = await sas(stack, *skip(task_id, "--force", "--by", "dan"))
    assert forced.returncode == 0, forced.stderr
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED
    assert [(s.name, s.state) for s in result.steps][-1] == ("ship", "Skipped")
    async with stack.sessions() as session:
        [entry] = [a for a in await audit_for(session, task_id) if a.action == "skip"]
    assert entry.actor == "dan" and "forced past the point of no return" in entry.changed
    row = next(s for s in (await stack.record(task_id)).steps if s.name == "ship")  # type: ignore[union-attr]
    assert row.note == f"skipped by dan (forced past the point of no return): {REASON}"
