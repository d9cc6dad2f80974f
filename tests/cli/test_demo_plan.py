"""``sas demo`` finds its plan as it finds a task type: in an entry point group (``sas.demos``)
that an installed package declares. The order example's is found and is valid; without a demo,
with several, or with one that cannot run, ``sas demo`` says so in one line before it starts
anything. Fresh interpreters over real installed metadata (a ``.dist-info`` on the path, as pip
writes it), so entry points are read as an installed package's are."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import sas.api
from sas.client.inputs import validate_input
from sas.task_models.outbound import OutboundPolicy
from sas.task_types.demos import DEMO_ENTRY_POINT_GROUP, DemoPlan, load_demo

ROOT = Path(__file__).resolve().parents[2]


def test_the_order_example_declares_its_demo_and_every_case_is_a_valid_order() -> None:
    name, plan = load_demo(None, 14)
    assert name == "orders" and plan.task_type == "order" and len(plan.cases) == 14
    assert {case.expected for case in plan.cases} == {"Processed", "Compensated", "Error"}
    assert [c.name for c in plan.cases[12:]] == ["clean", "flaky-payment"]  # the cases in turn
    for case in plan.cases:
        validate_input(plan.task_type, case.input, OutboundPolicy())
    assert [c.terminate_during for c in plan.cases if c.terminate_during] == ["ship"]
    # The shape a team's demo returns is public.
    assert sas.api.DemoPlan is DemoPlan and sas.api.DEMO_ENTRY_POINT_GROUP == DEMO_ENTRY_POINT_GROUP == "sas.demos"


def installed(folder: Path, name: str, demos: dict[str, str], module: str) -> Path:
    """A package as pip installs it: its module, and its metadata naming its demos."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(module))
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{demo} = {target}\n" for demo, target in demos.items())
    (info / "entry_points.txt").write_text(f"[{DEMO_ENTRY_POINT_GROUP}]\n{lines}")
    return folder


def run_demo(tmp_path: Path, *args: str, path: list[Path], isolated: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    env.update(PYTHONPATH=os.pathsep.join(map(str, path)), SAS_TEMPORAL__ADDRESS="127.0.0.1:1", COLUMNS="80")
    flags = ["-S"] if isolated else []  # -S: no site-packages, so only what PYTHONPATH holds is installed
    argv = [sys.executable, *flags, "-c", "from sas.cli.main import main; main()", "demo", "--tasks", "2", *args]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def site_without_sas_packages(tmp_path: Path) -> Path:
    """The venv's packages, less sas's own and its examples' metadata and editable finders."""
    view = tmp_path / "site"
    view.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.name.startswith(("sas", "__editable__")) or entry.suffix == ".pth":
            continue
        (view / entry.name).symlink_to(entry)
    return view


def lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_without_a_demo_installed_it_says_so_in_one_line(tmp_path: Path) -> None:
    done = run_demo(tmp_path, path=[ROOT, site_without_sas_packages(tmp_path)], isolated=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert lines(done.stderr) == [
        "sas: sas demo: no demo is installed (none in the sas.demos entry point group)",
        "  install an example that declares one: pip install -e examples/orders",
    ], done.stderr
    assert not (tmp_path / ".sas").exists()  # nothing was started


TEAM_DEMO = """
from sas.api import DemoCase, DemoPlan

def plan(count):
    return DemoPlan(task_type="parcel", cases=[DemoCase(name="one", expected="Processed")] * count)

def broken(count):
    raise RuntimeError("no fixtures here")

def shapeless(count):
    return {"task_type": "order", "cases": []}
"""


def test_with_several_demos_one_is_picked_and_what_cannot_run_is_one_line(tmp_path: Path) -> None:
    demos = {"team": "team_demo:plan", "broken": "team_demo:broken", "shapeless": "team_demo:shapeless"}
    team = installed(tmp_path / "team", "team_demo", demos, TEAM_DEMO)
    several = run_demo(tmp_path, path=[team])
    assert several.returncode == 1
    assert lines(several.stderr) == [
        "sas: sas demo: 4 demos are installed: broken, orders, shapeless, team",
        "  pick one with --demo NAME",
    ], several.stderr
    cases = {
        "team": "sas: demo 'team' runs task type 'parcel', which is not registered",
        "broken": "sas: demo 'broken': its plan failed: RuntimeError: no fixtures here",
        "shapeless": "sas: demo 'shapeless': not a valid plan: cases: Tuple should have at least 1 item after validation, not 0",
        "nosuch": "sas: sas demo: no demo 'nosuch' is installed",
    }
    for demo, line in cases.items():
        done = run_demo(tmp_path, "--demo", demo, path=[team])
        assert done.returncode == 1 and lines(done.stderr)[0] == line, done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / ".sas").exists()


@pytest.mark.parametrize("count", [1, 12, 25])
def test_the_order_plan_has_as_many_cases_as_asked(count: int) -> None:
    from sas_orders.demo import plan

    assert len(plan(count).cases) == count
