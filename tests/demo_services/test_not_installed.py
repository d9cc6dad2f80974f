"""The demo services are a package of their own, not sas's: ``sas services serve`` and ``sas up``
run what the ``sas.demo_services`` entry point names, and without it installed each says so in
one line, with what to install, before starting anything.

Run in an environment without the package: ``python -S`` and the chaos run's site view (this
checkout's code and metadata, the venv's other packages) with the demo services' folder and
metadata taken out, so no installed copy anywhere can answer for them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench._chaos_env import build_site, packages, remove_site
from sas.runtime.demo_services import demo_services_module

ROOT = Path(__file__).resolve().parents[2]
MISSING = "the demo services are not installed"


@pytest.fixture(scope="module")
def without_demo_services() -> Iterator[dict[str, str]]:
    site = build_site(ROOT)
    try:
        (info,) = site.glob("sas_demo_services-*.dist-info")
        shutil.rmtree(info)
        # Not their folder either: an editable install leaves its metadata (*.egg-info) there.
        path = [str(p) for p in packages(ROOT) if p.name != "demo_services"]
        yield {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(site)])}
    finally:
        remove_site(site)


def sas(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", "-m", "sas.cli.main", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_installed_they_are_found_by_their_entry_point() -> None:
    assert demo_services_module() == "sas_demo_services"


@pytest.mark.parametrize("argv", [["services", "serve"], ["up", "--state-dir", "state"]])
def test_without_them_each_command_says_what_to_install(
    without_demo_services: dict[str, str], tmp_path: Path, argv: list[str]
) -> None:
    done = sas(without_demo_services, tmp_path, *argv)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert MISSING in lines[0] and "pip install -e examples/demo_services" in lines[0], lines[0]
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "state" / "temporal.db").exists()  # nothing was started
