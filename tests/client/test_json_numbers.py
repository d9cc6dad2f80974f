"""``TaskClient.submit`` keeps the strict JSON rule (``sas.workflows.inputs.json_problems``): a
NaN or an infinity in a task's input is refused naming its field, before anything is started.
Before, ``{"rate": nan}`` was started as the payload ``{"rate": NaN}``, which no other SDK or the
UI can read, and an infinity inside a dict field was started as ``null``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sas.client.errors import InvalidInput
from sas.client.task_client import TaskClient
from sas.settings import get_settings
from sas.task_models import TaskState
from sas.workflows import registry
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id
from tests.stack import Stack, start_stack


@pytest.fixture
def rated_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tests/bad_input/rated.py registered beside the installed types: a float field and a dict of anything."""
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.bad_input.rated")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def rated_stack(
    rated_type: None, client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as running:
        yield running


async def never_started(client: Client, task_id: str) -> bool:
    try:
        await client.get_workflow_handle(task_id).describe()
    except RPCError as err:
        return err.status == RPCStatusCode.NOT_FOUND
    return False


@pytest.mark.parametrize(
    "given, named",
    [
        ({"rate": float("nan")}, "'rate': NaN"),
        ({"extra": {"limits": [1, float("inf")]}}, "'extra.limits.1': Infinity"),
        ({"rate": "-Infinity"}, "'rate': -Infinity"),
        ({"extra": {"d": Decimal("sNaN")}}, "'extra.d': NaN"),
    ],
)
async def test_submit_refuses_a_non_finite_number_and_starts_nothing(
    rated_stack: Stack, given: dict[str, Any], named: str
) -> None:
    tasks = TaskClient(rated_stack.client, rated_stack.settings, actor="test")
    task_id = fresh_id("rated")
    with pytest.raises(InvalidInput) as refused:
        await tasks.submit("rated", given, task_id=task_id)
    assert refused.value.message == f"invalid rated:\n  {named} is not a JSON number; give a finite number"
    assert await never_started(rated_stack.client, task_id)


async def test_submit_of_finite_numbers_runs_the_task_with_its_input_unchanged(rated_stack: Stack) -> None:
    tasks = TaskClient(rated_stack.client, rated_stack.settings, actor="test")
    given = {"rate": 1e308, "extra": {"limits": [-0.5, 0, 2**53]}}
    submitted = await tasks.submit("rated", given)
    assert (await tasks.result(submitted.task_id)).state == TaskState.PROCESSED
    record = await rated_stack.record(submitted.task_id)
    assert record is not None and record.task.payload == {"callback_url": None, **given}
