"""docs/task-types.md's blocks on how a fan-out makes its waves and on what an item's call can
read, run exactly as printed beside the fan-out module they import, as a team's tests would be."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sas.workflows.core.fanout import concurrency
from tests.helpers import forget_package, team_package

DOCS = Path(__file__).resolve().parents[2] / "docs" / "task-types.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/task-types.md has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def team_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The printed tests go in the package too: the sandbox imports a workflow's module by name.
    team_package(
        tmp_path,
        {
            "payroll.py": printed("# my_team/payroll.py"),
            "test_payroll_waves.py": printed("# tests/test_payroll_waves.py"),
            "test_payroll_currency.py": printed("# tests/test_payroll_currency.py"),
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    forget_package("my_team")


def printed_module(name: str) -> Any:
    return importlib.import_module(f"my_team.{name}")


async def test_the_printed_waves_test_passes(team_module: None) -> None:
    module = printed_module("test_payroll_waves")
    await module.test_a_refusal_in_the_first_wave_stops_the_waves_after_it()
    step = module.IN_WAVES
    # The numbers the text gives, from the rule the Scheduler runs.
    assert concurrency(step.max_concurrency, step.batch_size) == (2, 2)
    assert concurrency(20, 100) == (20, 1) and concurrency(250, 100) == (100, 2)


async def test_the_printed_item_reads_test_passes(team_module: None) -> None:
    await printed_module("test_payroll_currency").test_each_item_s_call_reads_the_currency_copied_into_its_item()


def test_an_item_s_call_reading_an_earlier_result_is_refused_when_the_type_loads(team_module: None) -> None:
    from my_team.payroll import PAY, PAYROLL, Paid, PayrollInput  # type: ignore[import-not-found]

    from sas.api import ForEach, Input, Result, TaskDefinition
    from sas.task_types.call_checks import calls_problem

    reads_a_result = ForEach(
        "pay",
        PAYROLL.post("/payroll/pay", body={"to": Input("id"), "run": Result("report", "run")}, result=Paid),
        PAY.undo,
        items=PAY.items,
        key=PAY.key,
    )
    problem = calls_problem(TaskDefinition("payday_reads", PayrollInput, (reads_a_result,)))
    assert problem is not None and "Result('report', ...) is not given to an item's call" in problem
