"""The ``sas`` command and a team's task type: listed by ``sas types``, submitted with
``sas submit --type T --input FILE`` (validated against its input model, errors naming the JSON
fields), in every help, in ``.sas/env``; a broken registration is one line. None of these
needs Temporal: each stops, or answers, before connecting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from tests import cli_process
from tests.task_types.conftest import trip_module


def sas(
    tmp_path: Path, *args: str, module: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "SAS_TEMPORAL__ADDRESS": "127.0.0.1:1",  # nothing answers: these commands must not need it
        "COLUMNS": "100",
    }
    if module is not None:
        env["SAS_TASK_TYPES__MODULES"] = module
    argv = [sys.executable, "-m", "sas.cli.main", *args]
    return cli_process.run(argv, capture_output=True, text=True, env=env, input=stdin, timeout=60, cwd=tmp_path)


def write_module(tmp_path: Path, text: str) -> str:
    name = f"team_types_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    return name


def test_sas_types_lists_a_team_type_with_its_steps_services_and_input(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module())
    listed = sas(tmp_path, "types", "--json", module=module)
    assert listed.returncode == 0, listed.stderr
    by_name = {t["task_type"]: t for t in json.loads(listed.stdout)}
    assert {"order", "preorder", "trip", "tour"} <= set(by_name)  # the order example, installed, and the team's
    tour = by_name["tour"]
    assert tour["workflow_type"] == "TourWorkflow" and tour["module"] == module
    assert tour["flow"] == "(flight ‖ hotel) → note" and tour["services"] == ["air", "inn"]
    flight = tour["steps"][0]
    assert flight["kind"] == "http" and flight["call"] == "POST /air/book" and flight["undo"] == "air.cancel"
    assert tour["input_schema"]["required"] == ["traveller"]

    shown = sas(tmp_path, "types", "tour", module=module)
    assert shown.returncode == 0 and "air.book (POST /air/book)" in shown.stdout
    assert "sas submit --type tour --input tour.json" in shown.stdout


def test_submit_validates_a_team_input_naming_the_json_fields(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module())
    (tmp_path / "tour.json").write_text(json.dumps({"nights": "two", "travler": "Ada"}))
    done = sas(tmp_path, "submit", "--type", "tour", "--input", "tour.json", module=module)
    assert done.returncode == 1
    assert "'traveller' in tour.json: required" in done.stderr
    assert "'nights' in tour.json: Input should be a valid integer" in done.stderr
    assert "'travler' in tour.json: not a field of this task type" in done.stderr
    # From stdin, and a --set that names no field of the type.
    piped = sas(tmp_path, "submit", "--type", "tour", "--input", "-", "--set", "sku=X", module=module, stdin="{}")
    assert "'traveller' in the JSON input: required" in piped.stderr and "--set sku: not a field" in piped.stderr


def test_an_unknown_type_says_which_are_registered(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module())
    done = sas(tmp_path, "submit", "--type", "tourr", "--input", "-", module=module, stdin="{}")
    assert done.returncode == 1 and "unknown task type" in done.stderr and "tour" in done.stderr


def test_the_helps_name_no_fixed_list_of_types(tmp_path: Path) -> None:
    for command in (["submit"], ["schedule", "create"], ["retry"]):
        helped = sas(tmp_path, *command, "--help")
        assert helped.returncode == 0 and "order | preorder" not in helped.stdout
    assert "sas types" in sas(tmp_path, "submit", "--help").stdout


def test_a_broken_registration_is_one_line_for_the_command_too(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module(task_type="inn"))
    done = sas(tmp_path, "types", module=module)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"sas: {module}: task type 'inn' has the name of a service its Agents call"
        " (SAS_SERVICES__INN__*, queue *.inn); rename the task type"
    )


def test_sas_types_refuses_a_name_of_sas_s_own_in_one_line(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module().replace('Service("inn", lookup=None)', 'Service("callback")'))
    done = sas(tmp_path, "types", module=module)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        f"sas: {module}: task type 'tour': Agent 'callback.book' of step 'hotel' is on service 'callback', whose"
        " activities are sas's own (mirror.*, callback.*, cleanup.*, supervisor.*, child.*); give the service another name"
    )
    assert "Traceback" not in done.stderr


def test_the_env_file_of_sas_up_keeps_per_service_settings(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sas.cli.up_demo_cmd import _inherited_settings

    monkeypatch.setenv("SAS_SERVICES__AIR__URL", "http://127.0.0.1:9001")
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "my_team.trip")
    monkeypatch.setenv("SAS_SERVICES__AIR__AUTH_TOKEN", "Bearer very-secret")
    lines = _inherited_settings({"SAS_SERVICES__URL": "http://127.0.0.1:8081"})
    assert "export SAS_SERVICES__AIR__URL=http://127.0.0.1:9001\n" in lines
    assert "export SAS_TASK_TYPES__MODULES=my_team.trip\n" in lines
    assert not any("very-secret" in line for line in lines)
    assert any(line.startswith("# SAS_SERVICES__AIR__AUTH_TOKEN") for line in lines)


def test_sas_types_draws_a_group_s_branches_and_gives_its_shape_in_json(tmp_path: Path) -> None:
    branched = trip_module().replace(
        "TourInput, (Parallel(FLIGHT, HOTEL), NOTE))", "TourInput, (Parallel(Sequence(FLIGHT, NOTE), HOTEL),))"
    )
    module = write_module(tmp_path, "from sas.api import Sequence\n" + branched)
    shown = sas(tmp_path, "types", "tour", module=module)
    assert shown.returncode == 0, shown.stderr
    assert "([flight → note] ‖ hotel)" in shown.stdout
    listed = sas(tmp_path, "types", "tour", "--json", module=module)
    (tour,) = json.loads(listed.stdout)
    assert tour["shape"] == [{"parallel": [{"sequence": ["flight", "note"]}, "hotel"]}]
    assert [(s["name"], s["stage"]) for s in tour["steps"]] == [("flight", 0), ("note", 0), ("hotel", 0)]
