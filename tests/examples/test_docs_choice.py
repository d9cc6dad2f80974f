"""docs/task-types.md's "Choice" blocks, exactly as printed: the module of a type with one of
two paths, loaded as a team's module is (it keeps every rule of ``sas/task_types/checks.py``),
drawn as ``sas types`` draws it, and its test, run as printed on the time-skipping environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sas.task_types.discovery import discover
from tests.examples.test_docs_branches import printed
from tests.helpers import forget_package, team_package


@pytest.fixture
def team_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    team_package(tmp_path, {"delivered_order.py": printed("# my_team/delivered_order.py")})
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    forget_package("my_team")


def test_the_printed_module_loads_and_is_drawn_as_the_docs_say(team_module: None) -> None:
    from sas.cli.types_cmd import describe

    found = discover(("my_team.delivered_order",)).types["delivered_order"]
    entry = describe(found)
    assert entry["flow"] == "reserve → (rush | [pack → post])"
    assert entry["shape"][1] == {
        "choice": [
            {"when": "express delivery", "path": "rush"},
            {"when": "otherwise", "path": {"sequence": ["pack", "post"]}},
        ]
    }
    paths = {s["name"]: s.get("path_of_choice") for s in entry["steps"]}
    assert paths == {"reserve": None, "rush": "express delivery", "pack": "otherwise", "post": "otherwise"}


async def test_the_printed_test_passes(team_module: None) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(printed("# tests/test_delivered_order.py"), "tests/test_delivered_order.py", "exec"), namespace)
    await namespace["test_one_path_runs_and_the_other_is_skipped"]()


def test_sas_types_says_each_path_and_when_it_is_taken(tmp_path: Path) -> None:
    from tests.task_types.test_cli import sas

    team_package(tmp_path, {"delivered_order.py": printed("# my_team/delivered_order.py")})
    shown = sas(tmp_path, "types", "delivered_order", module="my_team.delivered_order")
    assert shown.returncode == 0, shown.stderr
    assert "reserve → (rush | [pack → post])" in shown.stdout
    assert "one of: rush (express delivery) | pack → post (otherwise)" in shown.stdout
