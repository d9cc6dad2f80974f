"""docs/task-types.md's "Branches" blocks, exactly as printed: the module of a group with a
branch, loaded as a team's module is (it keeps every rule of ``sas/task_types/checks.py``), and
its test, run as printed on the time-skipping environment."""

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
    team_package(tmp_path, {"branched_trip.py": printed("# my_team/branched_trip.py")})
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    forget_package("my_team")


def test_the_printed_module_keeps_the_rules_and_draws_its_branch(team_module: None) -> None:
    from sas.cli.types_cmd import shape
    from sas.workflows.summaries import task_summary

    definition = discover(("my_team.branched_trip",)).types["branched_trip"].definition
    assert task_summary(definition, "t", {}).endswith("([flight → seat] ‖ room)")
    assert [shape(stage) for stage in definition.stages] == [{"parallel": [{"sequence": ["flight", "seat"]}, "room"]}]


async def test_the_printed_test_passes(team_module: None) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(printed("# tests/test_branched_trip.py"), "tests/test_branched_trip.py", "exec"), namespace)
    await namespace["test_a_refused_seat_undoes_the_room_and_the_flight"]()
