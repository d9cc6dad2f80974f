"""sas installs as one package, ``sas``, and its design-card folders stay at the repository root.

Everything of ours in site-packages is under ``sas/``, so no module of ours can collide with
another distribution's (``settings`` or ``worker`` at the top level would). The folders the
design card names - ``workflows/``, ``activities/`` and ``supervisor/`` - are linked into
``sas/`` and installed from there; imported by their bare names from the repository root they
would be second copies of every class, so they refuse. The worker is ``sas/worker.py``, run by
``worker.py`` at the root."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CARD_FOLDERS = ("workflows", "activities", "supervisor")


@pytest.mark.parametrize("folder", CARD_FOLDERS)
def test_a_design_card_folder_is_at_the_root_and_is_the_package_s_own(folder: str) -> None:
    assert (ROOT / folder / "__init__.py").is_file(), f"{folder}/ should be a real folder at the repository root"
    link = ROOT / "sas" / folder
    assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), f"sas/{folder} should link to ../{folder}"
    module = __import__(f"sas.{folder}", fromlist=["_"])
    assert Path(module.__file__ or "").resolve() == (ROOT / folder / "__init__.py").resolve()


@pytest.mark.parametrize("folder", CARD_FOLDERS)
def test_importing_a_folder_by_its_bare_name_is_refused(folder: str) -> None:
    """From the repository root (where ``python worker.py`` runs) the bare name is importable as
    a folder; it must fail loudly instead of loading a second copy of the package."""
    done = subprocess.run(
        [sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert f"ImportError: import sas.{folder}, not {folder}" in done.stderr, done.stderr


def test_worker_py_at_the_root_runs_sas_worker() -> None:
    """The worker is a module of the package; the root's ``worker.py`` (what the image and
    deploy/k8s run) only calls its ``main``."""
    module = ROOT / "sas" / "worker.py"
    assert module.is_file() and not module.is_symlink(), "sas/worker.py should be the worker itself, not a link"
    from sas import worker

    entry = runpy.run_path(str(ROOT / "worker.py"), run_name="worker_entry")  # not __main__: nothing starts
    assert entry["main"] is worker.main
