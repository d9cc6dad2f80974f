"""docs/task-types.md's "Fan-out" blocks, exactly as printed: the module of a fan-out, loaded as
a team's module is (it keeps every rule of ``sas/task_types/checks.py``), and its test, run as
printed on the time-skipping environment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sas.task_types.discovery import discover
from tests.helpers import forget_package, team_package

DOCS = Path(__file__).resolve().parents[2] / "docs" / "task-types.md"


def printed(first_line: str) -> str:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, f"docs/task-types.md has no single block starting {first_line!r}"
    return blocks[0]


@pytest.fixture
def team_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    team_package(tmp_path, {"payroll.py": printed("# my_team/payroll.py")})
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    forget_package("my_team")


def test_the_printed_module_keeps_the_rules_and_draws_its_fan_out(team_module: None) -> None:
    from sas.cli.types_cmd import fan_out
    from sas.workflows.summaries import task_summary

    definition = discover(("my_team.payroll",)).types["payday"].definition
    assert task_summary(definition, "t", {}).endswith("pay (for each)")
    assert fan_out(definition.step("pay")) == {
        "max_concurrency": 20,
        "batch_size": 100,
        "tolerate": {"count": None, "percent": 5},
    }


async def test_the_printed_test_passes(team_module: None) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(printed("# tests/test_payroll.py"), "tests/test_payroll.py", "exec"), namespace)
    await namespace["test_each_recipient_is_paid_under_their_own_key"]()
