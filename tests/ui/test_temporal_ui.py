"""The Temporal UI tells each task's story: the session's dev server with its UI,
tasks run into completed, compensated, parked and delayed states, and the UI's list and
workflow pages read in headless Chromium.

With ``SAS_UI_SCREENSHOTS=<folder>`` the test also saves the pages it reads as PNG files:
``docs/img/`` is made this way (docs/operator.md says how).
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from temporalio.client import Client

from sas.api.client import TaskClient
from sas.task_models import OperatorAnswer, OperatorRequest, TaskResult, TaskState, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order
from tests.ui.chromium import Browser, chromium_binary

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # slow by its fixtures too: marked to start first

SCREENSHOTS = os.environ.get("SAS_UI_SCREENSHOTS")
# The list columns docs/operator.md suggests: Temporal's status beside sas's own state.
COLUMNS = json.dumps(
    {
        "default": [
            {"label": label}
            for label in (
                "Status",
                "Workflow ID",
                "SasTaskState",
                "SasCurrentStep",
                "SasFailureCount",
                "Type",
                "Start",
                "End",
            )
        ]
    }
)


def row(page: str, task_id: str) -> str:
    """The list row of ``task_id`` as the page's text has it: cells separated by tabs, the
    status badge on the line before the id's."""
    lines = page.splitlines()
    found = next((i for i, line in enumerate(lines) if f"{task_id}\t" in line), None)
    return "" if found is None else " ".join(lines[max(found - 1, 0) : found + 1])


async def status_of(client: Client, task_id: str) -> TaskStatus:
    return await client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)


async def waiting_at(client: Client, task_id: str, state: TaskState) -> TaskStatus:
    return await wait_until(
        lambda: status_of(client, task_id), lambda s: s.state == state, timeout=30, what=f"{task_id} {state}"
    )


async def test_the_ui_shows_summaries_current_details_and_a_compensated_task(
    stack_no_supervisor: Stack, ui_url: str
) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.fail("headless Chromium is missing: apt-get install -y chromium (.ci/run installs it)")
    stack = stack_no_supervisor
    client, settings, queue = stack.client, stack.settings, stack.settings.temporal.task_queue
    done_id, undone_id, parked_id, later_id = (fresh_id(p) for p in ("ui-done", "ui-undone", "ui-parked", "ui-later"))
    await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=undone_id)
    await stack.add_fault(endpoint="payment.charge", kind="transient", match_order_id=parked_id)
    payload = order().model_dump(mode="json")  # 2 x SKU-1, 19.99 EUR
    # Started by the task client, as `sas submit` starts them, so they carry its summary and details.
    tasks = TaskClient(client, settings)
    for task_id in (done_id, undone_id, parked_id):
        await tasks.submit("order", payload, task_id=task_id)
    await tasks.submit("order", payload, task_id=later_id, delay=timedelta(hours=1))

    # completed
    done = await client.get_workflow_handle(done_id, result_type=TaskResult).result()
    assert done.state == TaskState.PROCESSED
    # compensated: ship fails; an operator compensates
    await waiting_at(client, undone_id, TaskState.FAILED)
    await client.get_workflow_handle(undone_id).execute_update(
        "request_compensate", OperatorRequest(by="ui-test", reason="customer cancelled"), result_type=OperatorAnswer
    )
    undone = await client.get_workflow_handle(undone_id, result_type=TaskResult).result()
    assert undone.state == TaskState.COMPENSATED
    # The last error is kept after compensation: in the result and in the state store.
    assert "503" in (next(s for s in undone.steps if s.name == "ship").last_error or "")
    mirrored = await stack.record(undone_id)
    assert mirrored is not None and mirrored.task.state == "Compensated"
    assert "503" in (next(s for s in mirrored.steps if s.name == "ship").last_error or "")
    # parked: charge fails; parked the way the Supervisor parks it
    await waiting_at(client, parked_id, TaskState.FAILED)
    await client.get_workflow_handle(parked_id).signal(
        "park", OperatorRequest(step="charge", failure_count=3, by="supervisor", reason="FailureCount 3")
    )
    await waiting_at(client, parked_id, TaskState.ERROR)

    # The list page reads visibility once when it loads: wait until visibility has caught up.
    async def listed(query: str) -> list[str]:
        async with httpx.AsyncClient() as http:
            response = await http.get(
                f"{ui_url}/api/v1/namespaces/default/workflows", params={"query": f"TaskQueue = '{queue}' AND {query}"}
            )
            response.raise_for_status()
            return sorted(e["execution"]["workflowId"] for e in response.json().get("executions") or [])

    await wait_until(lambda: listed("SasTaskState = 'Compensated'"), lambda ids: ids == [undone_id], timeout=30)
    await wait_until(lambda: listed("SasTaskState = 'Error'"), lambda ids: ids == [parked_id], timeout=30)

    def read_pages() -> dict[str, str]:
        shots = Path(SCREENSHOTS) if SCREENSHOTS else None
        pages: dict[str, str] = {}
        with Browser(binary) as browser:
            # The list of this test's tasks, with the columns docs/operator.md has an operator add
            # ("Configure Columns"; the UI keeps them in the browser's local storage).
            browser.open(f"{ui_url}/namespaces/default/workflows")
            browser.wait_for_text("Workflows")
            browser.evaluate(f"localStorage.setItem('namespace-workflow-table-columns', {json.dumps(COLUMNS)})")
            mine = quote(f"TaskQueue = '{queue}'")
            browser.open(f"{ui_url}/namespaces/default/workflows?query={mine}")
            pages["list"] = browser.wait_for_text(done_id, undone_id, parked_id, later_id, "Compensated")
            if shots:
                browser.screenshot(shots / "ui-list.png")
            # The saved view "compensated": only the undone task.
            compensated = f"TaskQueue = '{queue}' AND SasTaskState = 'Compensated'"
            browser.open(f"{ui_url}/namespaces/default/workflows?query={quote(compensated)}")
            pages["compensated view"] = browser.wait_for_text(undone_id)
            for name, task_id, needles in (
                ("compensated", undone_id, ("Task state: Compensated", "FailureCount")),
                ("parked", parked_id, ("Task state: Error", "needs an operator", f"sas retry {parked_id}")),
            ):
                browser.open(f"{ui_url}/namespaces/default/workflows/{task_id}")
                browser.wait_for_text("User Metadata")
                run_page = browser.evaluate("location.pathname").rsplit("/", 1)[0]
                browser.open(f"{ui_url}{run_page}/user-metadata")
                pages[name] = browser.wait_for_text(f"order {task_id} · 2 × SKU-1 · 19.99 EUR", *needles)
                if shots:
                    browser.screenshot(shots / f"ui-{name}.png")
        return pages

    pages = await asyncio.to_thread(read_pages)
    # At a glance in the list: Temporal says COMPLETED for both finished orders; SasTaskState tells them apart.
    assert "Processed" in row(pages["list"], done_id) and "COMPLETED" in row(pages["list"], done_id)
    assert "Compensated" in row(pages["list"], undone_id) and "COMPLETED" in row(pages["list"], undone_id)
    assert "Error" in row(pages["list"], parked_id) and "charge" in row(pages["list"], parked_id)
    assert "RUNNING" in row(pages["list"], later_id) and "Processed" not in row(pages["list"], later_id)
    assert "reserve → charge → ship" in pages["compensated"]
    assert "Last error" in pages["compensated"] and "ship" in pages["compensated"]
    assert "Compensated" in pages["compensated"]
    assert done_id not in pages["compensated view"] and parked_id not in pages["compensated view"]
