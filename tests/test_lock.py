"""requirements.lock and requirements-runtime.lock keep up with pyproject.toml.

.ci/run installs from requirements.lock and the Dockerfile from requirements-runtime.lock, so a
dependency added to pyproject without refreshing them would be missing there (docs/testing.md says
how to refresh both in one line)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(name: str) -> dict[str, str]:
    return {canonicalize_name(n): v for n, v in PIN.findall((ROOT / name).read_text())}


def declared() -> tuple[list[Requirement], list[Requirement]]:
    """The project's own dependencies, and those of every extra (not its references to itself)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [Requirement(r) for reqs in project["optional-dependencies"].values() for r in reqs]
    return [Requirement(r) for r in project["dependencies"]], [r for r in extras if r.name != project["name"]]


def test_every_declared_dependency_is_locked_at_a_version_it_allows() -> None:
    locked = pins("requirements.lock")
    base, extras = declared()
    for req in base + extras:
        version = locked.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not in requirements.lock: refresh it (docs/testing.md)"
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.lock has {req.name}=={version}, pyproject wants {req.specifier}: refresh it"
        )


def test_the_image_lock_is_the_runtime_part_of_the_lock() -> None:
    locked, runtime = pins("requirements.lock"), pins("requirements-runtime.lock")
    base, _ = declared()
    assert {canonicalize_name(r.name) for r in base} <= runtime.keys(), "refresh requirements-runtime.lock"
    differ = {name: (version, locked.get(name)) for name, version in runtime.items() if locked.get(name) != version}
    assert not differ, f"requirements-runtime.lock differs from requirements.lock: {differ}"


def test_each_lock_says_how_it_was_made_and_the_docs_say_the_same() -> None:
    docs = (ROOT / "docs/testing.md").read_text()
    for name in ("requirements.lock", "requirements-runtime.lock"):
        header = (ROOT / name).read_text().splitlines()[:3]
        (command,) = [line.strip("# ").strip() for line in header if line.lstrip("# ").startswith("uv pip compile")]
        assert command.endswith(f"-o {name}") and command in docs, f"{name}: {command!r} is not docs/testing.md's"
