"""A broken registration stops the worker before it connects to anything, with one line that
names the module and the problem (exit code 2, as for bad settings)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.task_types.conftest import trip_module


def start_worker(tmp_path: Path, *texts: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    names = []
    for text in texts:
        name = f"team_types_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        names.append(name)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "SAS_TASK_TYPES__MODULES": ",".join(names),
        # Nothing answers here: the worker must stop before it tries.
        "SAS_TEMPORAL__ADDRESS": "127.0.0.1:1",
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
    }
    argv = [sys.executable, "-m", "sas.cli.main", "worker"]
    return names, subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)


@pytest.mark.parametrize(
    ("texts", "problem"),
    [
        (
            [trip_module().replace("from sas.api import", "import no_such_package\nfrom sas.api import")],
            "cannot be imported",
        ),
        ([trip_module(), trip_module(workflow="OtherWorkflow")], "task type 'tour' is declared twice"),
        ([trip_module(task_type="air")], "task type 'air' has the name of a service"),
        (
            [trip_module().replace('Service("air")', 'Service("mirror")').replace("/air/book", "/mirror/accept")],
            "Agent 'mirror.accept' of step 'flight' is on service 'mirror', whose activities are sas's own",
        ),
        ([trip_module(workflow="SupervisorWorkflow")], "workflow type 'SupervisorWorkflow' is the name of sas's own"),
        (
            [trip_module().replace('    irreversible="a note stays on the booking, which its undo cancels",\n', "")],
            "task type 'tour': step 'note': has no undo",
        ),
    ],
    ids=["import fails", "two of one name", "named like a service", "sas's activity", "sas's workflow", "no undo"],
)
def test_a_broken_registration_stops_the_worker_with_one_line(tmp_path: Path, texts: list[str], problem: str) -> None:
    names, done = start_worker(tmp_path, *texts)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("sas: ") and problem in lines[0] and names[-1] in lines[0]
    assert not (tmp_path / "state.db").exists()  # stopped before the state store
