"""The wheel, built for real (setuptools, as ``pip install .`` and the Dockerfile build it).

It holds one top-level package, ``sas``, with every module of the repository's ``sas/`` and of
the design card's folders (``workflows/``, ``activities/``, ``supervisor/``) under it, the state
store's alembic files, and nothing else: no tests, benchmarks or examples, and not the demo's
remote services (``examples/demo_services``, a package of their own). Installed on its own
(not the editable install), ``sas.workflows`` and the rest import from it and the ``sas``
command runs.

Fast enough for every run: one build of about 10 s on a busy machine, shared by this module's
tests (one xdist group). pip fetches the build backend the way ``pip install .`` does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where each part of the package comes from in the repository, by its place in the wheel.
SOURCES = {
    "sas": ROOT / "sas",
    "sas/workflows": ROOT / "workflows",
    "sas/activities": ROOT / "activities",
    "sas/supervisor": ROOT / "supervisor",
}
# Files besides modules: the package data pyproject.toml declares.
DATA = {"sas/state_store/alembic.ini"}

pytestmark = pytest.mark.xdist_group("wheel")


def modules_in_the_repository() -> set[str]:
    """Every module of the package, named by its path in the wheel. Each folder is walked
    without following links, so a folder linked into another counts once, from where it is."""
    found = set()
    for inside, folder in SOURCES.items():
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            relative = Path(dirpath).relative_to(folder)
            found |= {(Path(inside) / relative / f).as_posix() for f in filenames if f.endswith(".py")}
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # Built from a copy, as git checks it out: setuptools writes build/ and *.egg-info beside
    # the sources, which the working tree should not collect.
    where = tmp_path_factory.mktemp("wheel")
    source = where / "source"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", ".sas", "build", "*.egg-info", "__pycache__", ".*_cache"),
    )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(where), str(source)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    (found,) = where.glob("sas-*.whl")
    yield found


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (top_level,) = (n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["sas"]
    dist_info = top_level.split("/", 1)[0]
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"sas", dist_info}, f"top-level entries besides sas: {sorted(tops - {'sas', dist_info})}"


def test_the_wheel_holds_every_module_of_the_package_and_nothing_else(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {n for n in archive.namelist() if n.startswith("sas/")}
    expected = modules_in_the_repository()
    # Spot checks, so that a walk that went wrong cannot make both sides empty alike.
    assert {
        "sas/worker.py",
        "sas/workflows/scheduler.py",
        "sas/workflows/core/__init__.py",
        "sas/activities/agent.py",
        "sas/supervisor/decide/policy.py",
        "sas/supervisor/__main__.py",
        "sas/state_store/migrations/env.py",
        "sas/cli/main.py",
    } <= expected
    assert any(n.startswith("sas/state_store/migrations/versions/") for n in expected)
    missing = sorted((expected | DATA) - in_wheel)
    assert not missing, f"missing from the wheel: {missing}"
    extra = sorted(in_wheel - expected - DATA)
    assert not extra, f"in the wheel but not a module of the package: {extra}"


def test_the_wheel_has_no_demo_services(wheel: Path) -> None:
    """The demo's remote services play the outside world: they ship in their own package, not sas's."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    folders = {part for n in names for part in n.split("/")[:-1]}
    assert not folders & {"remote_services", "sas_demo_services"}, sorted(folders)
    # Nor their modules under another folder: the ledger, the fault book, the effects they record.
    assert not [n for n in names if n.endswith(("/ledger.py", "/faults.py", "/operations.py"))], names


def test_the_wheel_installed_alone_imports_and_runs(wheel: Path, tmp_path: Path) -> None:
    """Installed into a directory of its own and put first on the path, so that neither the
    repository's folders nor the editable install can stand in for what the wheel lacks; the
    dependencies (and the examples' task types) come from this environment."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import sas.workflows, sas.activities, sas.supervisor, sas.worker, sas.cli.main, sas.state_store;"
        "import pathlib, sys;"
        "modules = (sas.workflows, sas.activities, sas.supervisor, sas.worker, sas.state_store);"
        "sys.exit(next((m.__name__ for m in modules if not pathlib.Path(m.__file__).is_relative_to(sys.argv[1])), 0))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", probe, str(target)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert imported.returncode == 0, f"imported from elsewhere than the wheel: {imported.stdout}{imported.stderr}"
    sas = target / "bin" / "sas"
    # The state store's migrations, run from the package.
    env["SAS_DATABASE__URL"] = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    said = {}
    for argv in (["--version"], ["types"], ["migrate"]):
        done = subprocess.run(
            [sys.executable, str(sas), *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"sas {' '.join(argv)}: {done.stdout}{done.stderr}"
        said[argv[0]] = done.stdout
    assert "OrderWorkflow" in said["types"], said["types"]  # the examples' types, through their entry points
    assert (tmp_path / "state.db").stat().st_size > 0
