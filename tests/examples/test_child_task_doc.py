"""docs/task-types.md's child task, exactly as printed: its module registered through the
setting, checked when the types load (and shown by ``sas types``), and run by a real worker on
the dev server over the order example's services - the parent and its child each completing,
each with its own effects, linked both ways."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from sas.cli.types_cmd import describe
from sas.settings import get_settings
from sas.state_store.queries import children_of
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from tests.helpers import fresh_id
from tests.stack import order, start_stack

DOC = Path(__file__).resolve().parents[2] / "docs" / "task-types.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/task-types.md has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def gift_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    package = tmp_path / "my_team"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gift.py").write_text(printed("# my_team/gift.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "my_team.gift")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


def test_the_printed_type_loads_and_sas_types_shows_its_child(gift_module: None) -> None:
    found = registry.task_types()["gift"]
    shown = describe(found)
    assert shown["flow"] == "reserve → order (child order) → ship"
    child = next(s for s in shown["steps"] if s["name"] == "order")
    assert child["kind"] == "child" and child["child_type"] == "order" and child["child_workflow"] == "OrderWorkflow"


@pytest.mark.slow
async def test_the_printed_type_runs_its_child_on_a_worker(
    gift_module: None,
    client: Client,
    temporal_address: str,
    services,
    sqlite_url: str,  # type: ignore[no-untyped-def]
) -> None:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        parent = fresh_id("g")
        result: TaskResult = await (await stack.submit(parent, order(), "GiftWorkflow")).result()
        assert result.state == TaskState.PROCESSED
        child = f"{parent}:order"
        assert [e["action"] for e in await stack.ledger(parent)] == ["reserve", "ship"]
        assert [e["action"] for e in await stack.ledger(child)] == ["reserve", "charge", "ship"]
        record = await stack.record(child)
        assert record is not None and record.task.state == "Processed"
        assert (record.task.parent_task_id, record.task.parent_step) == (parent, "order")
        async with stack.sessions() as session:
            assert [c.task_id for c in await children_of(session, parent)] == [child]
        step = next(s for s in result.steps if s.name == "order")
        assert step.result == {"child_task_id": child, "state": "Processed"}
