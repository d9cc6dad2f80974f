"""The chaos run's Python environment: the code of one checkout, whatever else the venv holds.

A shared venv can hold editable installs of sas and of its examples that point at another working
tree (``pip install -e`` run there). Their ``sas.task_types`` entry points would have every
process of the run import task types from that tree, uncommitted or half-written, and a worker
restarted mid-run would fail when it cannot. So the run's processes, and the run itself, start
with ``python -S`` (no site-packages, hence no editable finders) and a PYTHONPATH of:

- the checkout (or its snapshot) and each ``examples/*/`` package in it;
- a *site view*: links to everything the venv installed except the distributions the checkout
  declares and any editable install, plus the metadata (name, version, entry points) of the
  checkout's own ``pyproject.toml`` files, so entry points name the checkout's modules only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sysconfig
import tempfile
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

SITE_ENV = "SAS_CHAOS_SITE"
"""Set in the run's environment to its site view once the run has started isolated."""


def packages(root: Path) -> list[Path]:
    """The checkout and each of its examples: every directory that installs a package."""
    return [root, *sorted(p.parent for p in root.glob("examples/*/pyproject.toml"))]


def pythonpath(root: Path, site: Path) -> str:
    return os.pathsep.join(str(p) for p in [*packages(root), site])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _editable(dist: metadata.Distribution) -> bool:
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return bool(direct.get("dir_info", {}).get("editable"))


def _declared(root: Path) -> list[dict[str, Any]]:
    projects = []
    for package in packages(root):
        with open(package / "pyproject.toml", "rb") as f:
            projects.append(tomllib.load(f).get("project", {}))
    return projects


def build_site(root: Path) -> Path:
    """A new site view for the checkout at ``root`` (a temporary directory; the caller removes it)."""
    site = Path(tempfile.mkdtemp(prefix="sas-chaos-site-"))
    projects = _declared(root)
    ours = {_normal(str(p["name"])) for p in projects}
    skipped: set[str] = set()  # top-level names of the distributions left out
    for dist in metadata.distributions():
        name = _normal(dist.metadata["Name"] or "")
        if name in ours or _editable(dist):
            skipped.update(str(f).split("/", 1)[0] for f in dist.files or () if not str(f).startswith(".."))
    for installed in {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}:
        for entry in installed.iterdir():
            if entry.name in skipped or entry.suffix == ".pth" or entry.name == "__pycache__":
                continue
            if not (site / entry.name).exists():
                (site / entry.name).symlink_to(entry)
    for project in projects:
        name, version = str(project["name"]), str(project.get("version", "0"))
        info = site / f"{_normal(name)}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        groups: dict[str, dict[str, str]] = dict(project.get("entry-points", {}))
        if project.get("scripts"):
            groups["console_scripts"] = dict(project["scripts"])
        (info / "entry_points.txt").write_text(
            "".join(
                f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
                for group, points in groups.items()
            )
        )
    return site


def remove_site(site: Path) -> None:
    shutil.rmtree(site, ignore_errors=True)  # links only: what they point at stays
