"""docs/api.md's "From your own code" block, exactly as printed: a service's function that
places an order with the task client, on the SAS_* settings, and compensates it when it waits
for an operator, in the audit log under the person it acts for."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sas.api.client import TaskClient
from sas.settings import get_settings
from sas.state_store.queries import audit_for
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

API_DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", API_DOCS.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/api.md has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def place_order(stack_no_supervisor: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The printed function, on settings that name the test's stack (as SAS_* would)."""
    settings = stack_no_supervisor.settings
    monkeypatch.setenv("SAS_TEMPORAL__ADDRESS", settings.temporal.address)
    monkeypatch.setenv("SAS_TEMPORAL__TASK_QUEUE", settings.temporal.task_queue)
    monkeypatch.setenv("SAS_DATABASE__URL", settings.database.url)
    get_settings.cache_clear()
    namespace: dict[str, Any] = {}
    exec(compile(printed("# my_team/orders_service.py"), "orders_service.py", "exec"), namespace)
    yield namespace["place_order"]
    get_settings.cache_clear()


async def test_the_printed_service_places_an_order_and_placing_it_again_starts_nothing(place_order: Any) -> None:
    order_id = fresh_id("docs-order")
    assert await place_order(order().model_dump(mode="json"), order_id) == "Processed"
    assert await place_order(order().model_dump(mode="json"), order_id) == "Processed"  # the same task


async def test_the_printed_service_undoes_an_order_an_operator_parked(
    place_order: Any, stack_no_supervisor: Stack
) -> None:
    stack = stack_no_supervisor
    order_id = fresh_id("docs-parked")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=order_id)
    placing = asyncio.create_task(place_order(order().model_dump(mode="json"), order_id))
    await wait_until(lambda: stack.step_states(order_id), lambda s: s.get("charge") == "Failed")
    operator = TaskClient(stack.client, stack.settings)
    # A loaded machine (two suites on two cores) can take longer than the default 30 s to mirror it.
    await operator.park(order_id, by="bob@ops", reason="card blocked", confirm_within_s=120)

    assert await asyncio.wait_for(placing, timeout=120) == "Compensated"
    async with stack.sessions() as session:
        entries = {e.action: e for e in await audit_for(session, order_id)}
    assert (entries["park"].actor, entries["park"].reason) == ("bob@ops", "card blocked")
    assert (entries["compensate"].actor, entries["compensate"].reason) == (
        "support@shop",
        "the customer gave up waiting",
    )
