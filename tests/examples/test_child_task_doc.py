"""docs/task-types.md's child task, exactly as printed: its module registered through the
setting, checked when the types load (and shown by ``sas types``), and run by a real worker on
the dev server over the order example's services - the parent and its child each completing,
each with its own effects, linked both ways."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from sas.cli.types_cmd import describe
from sas.settings import get_settings
from sas.state_store.queries import children_of, get_task
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from tests.helpers import forget_package, fresh_id, team_package, wait_until
from tests.stack import ADMIN_HEADERS, migrated, order, start_stack

DOC = Path(__file__).resolve().parents[2] / "docs" / "task-types.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/task-types.md has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def gift_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    team_package(tmp_path, {"gift.py": printed("# my_team/gift.py")})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "my_team.gift")
    get_settings.cache_clear()
    registry.refresh()
    yield
    forget_package("my_team")
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


def _spawn_worker(folder: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sas.cli.main", "worker"], cwd=folder, env=env, stdout=out, stderr=out
        )


@pytest.mark.slow
async def test_a_worker_process_killed_mid_child_leaves_one_effect_per_step(
    tmp_path: Path,
    client: Client,
    temporal_address: str,
    services,  # type: ignore[no-untyped-def]
) -> None:
    """The printed type on a `sas worker` process killed (SIGKILL) while the child's charge is at
    the payment service; another worker takes over: parent and child complete, each effect once."""
    package = tmp_path / "my_team"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gift.py").write_text(printed("# my_team/gift.py"))
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await migrated(db_url)
    queue = f"gift-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")} | {
        "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SAS_TASK_TYPES__MODULES": "my_team.gift",
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": queue,
        "SAS_DATABASE__URL": db_url,
        "SAS_SERVICES__URL": services.url,
        "SAS_LOG_LEVEL": "INFO",
    }
    parent = fresh_id("g-kill")
    child = f"{parent}:order"
    async with httpx.AsyncClient() as http:
        fault = {"endpoint": "payment.charge", "kind": "latency", "latency_ms": 3_000, "match_order_id": child}
        (await http.post(f"{services.url}/admin/faults", json=fault, headers=ADMIN_HEADERS)).raise_for_status()
    first = _spawn_worker(tmp_path, env, tmp_path / "worker-1.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        await wait_until(
            lambda: _said(tmp_path / "worker-1.log", "polling"), timeout=90, what="the first worker polling"
        )
        handle = await client.start_workflow(
            "GiftWorkflow", order(), id=parent, task_queue=queue, result_type=TaskResult
        )
        await wait_until(
            lambda: _charge_state(db_url, child),
            lambda state: state == "Processing",
            timeout=90,
            what="the child's charge at the payment service",
        )
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        second = _spawn_worker(tmp_path, env, tmp_path / "worker-2.log")
        result = await handle.result()
        assert result.state == TaskState.PROCESSED
        async with httpx.AsyncClient() as http:
            for task_id, expected in ((parent, ["reserve", "ship"]), (child, ["reserve", "charge", "ship"])):
                entries = (await http.get(f"{services.url}/ledger", params={"order_id": task_id})).json()["entries"]
                assert [e["action"] for e in entries] == expected
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(30)


async def _said(log: Path, what: str) -> bool:
    return log.exists() and what in log.read_text(errors="replace")


async def _charge_state(db_url: str, task_id: str) -> str | None:
    from sas import state_store
    from sas.settings import DatabaseSettings

    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    try:
        async with state_store.session_factory(engine)() as session:
            record = await get_task(session, task_id)
    finally:
        await engine.dispose()
    return None if record is None else next((s.state for s in record.steps if s.name == "charge"), None)
