"""Two teams on one sas: a worker runs the task types it is told to (SAS_TASK_TYPES__RUN), so another
team's broken package does not stop it; and a service name is one service, so two packages that
each declare one of the same name are refused when they load, both named."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from sas.task_types.discovery import TaskTypeError, discover
from tests.task_types.conftest import trip_module

BROKEN = "import no_such_package_of_team_b\n"


def write(tmp_path: Path, text: str, package: str | None = None) -> str:
    """``text`` as a module on ``tmp_path`` (in its own package if named); its module name."""
    name = f"types_{uuid.uuid4().hex[:8]}"
    folder = tmp_path
    if package is not None:
        folder = tmp_path / package
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return f"{package}.{name}" if package else name


def test_two_packages_declaring_a_service_of_one_name_are_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    first = write(tmp_path, trip_module(task_type="tour"), package="team_a")
    second = write(tmp_path, trip_module(task_type="cruise", workflow="CruiseWorkflow"), package="team_b")
    with pytest.raises(TaskTypeError) as refused:
        discover((first, second))
    said = str(refused.value)
    assert "service 'air' is declared by two packages, team_a" in said and "and team_b" in said
    assert "SAS_SERVICES__AIR__URL" in said and len(said.splitlines()) == 1


def test_one_package_may_use_anothers_service_by_importing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    first = write(tmp_path, trip_module(task_type="tour"), package="team_c")
    user = f"""
    from sas.api import StepDefinition, TaskDefinition, task_workflow
    from {first} import FLIGHT, TourInput
    FLY = TaskDefinition("fly", TourInput, (FLIGHT,))
    FlyWorkflow = task_workflow(FLY, "FlyWorkflow")
    """
    second = write(tmp_path, user, package="team_d")
    found = discover((first, second))
    assert {"tour", "fly"} <= set(found.types) and "air" in found.services


def test_a_process_runs_only_its_types_and_another_teams_broken_package_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    good = write(tmp_path, trip_module(task_type="tour"), package="team_e")
    broken = write(tmp_path, BROKEN + trip_module(task_type="cruise", workflow="CruiseWorkflow"), package="team_f")
    with pytest.raises(TaskTypeError, match="cannot be imported"):
        discover((good, broken))  # every type: the broken package stops it
    found = discover((good, broken), only=("tour",))
    assert set(found.types) == {"tour"} and set(found.services) == {"air", "inn"}
    with pytest.raises(
        TaskTypeError, match=r"SAS_TASK_TYPES__RUN names task type 'cruise', which is not found: .*team_f"
    ):
        discover((good, broken), only=("cruise",))


def test_a_worker_restricted_to_one_teams_types_keeps_running_while_another_teams_package_is_broken(
    tmp_path: Path, temporal_address: str
) -> None:
    good = write(tmp_path, trip_module(task_type="tour"), package="team_g")
    broken = write(tmp_path, BROKEN + trip_module(task_type="cruise", workflow="CruiseWorkflow"), package="team_h")
    suffix = uuid.uuid4().hex[:8]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SAS_")},
        "PYTHONPATH": str(tmp_path),
        "SAS_TASK_TYPES__MODULES": f"{good},{broken}",
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": f"teams-{suffix}",
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
        "SAS_LOG_LEVEL": "INFO",
    }
    argv = [sys.executable, "-m", "sas.cli.main", "worker"]
    stopped = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert stopped.returncode == 2 and "cannot be imported" in stopped.stderr  # every type: it stops

    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            argv, stdout=out, stderr=out, env={**env, "SAS_TASK_TYPES__RUN": "tour"}, cwd=tmp_path
        )
    try:
        deadline = time.monotonic() + 120
        while b"polling" not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert worker.poll() is None  # running, with team_g's services' queues and nothing of team_h's
        assert f"teams-{suffix}.air".encode() in log.read_bytes()
    finally:
        worker.kill()
        worker.wait(30)
