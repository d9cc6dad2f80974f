"""docs/layout.md names every module of sas by its role: a newcomer finds any file from it, and a
module added without a line there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# sas/workflows, sas/activities and sas/supervisor are links to these folders.
FOLDERS = ("sas", "workflows", "activities", "supervisor")
LINKED = ("sas/workflows/", "sas/activities/", "sas/supervisor/")


def modules() -> list[str]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(LINKED) or "/migrations/" in rel or path.name in ("__init__.py", "__main__.py"):
                continue
            found.append(rel)
    return found


def named_on_the_page() -> set[str]:
    return set(re.findall(r"`([A-Za-z0-9_./]+\.py)`", (ROOT / "docs" / "layout.md").read_text()))


def is_named(module: str, named: set[str]) -> bool:
    parts = module.split("/")
    # Named by its path, or by its path inside its folder, or by its file name in its folder's row.
    forms = {module, "/".join(parts[1:]), "/".join(parts[-2:]), parts[-1]}
    return any(form in named or any(n.endswith("/" + form) for n in named) for form in forms)


def test_every_module_is_named_in_the_layout_page() -> None:
    named = named_on_the_page()
    missing = [m for m in modules() if not is_named(m, named)]
    assert missing == [], f"docs/layout.md names no role for: {', '.join(missing)}"


def test_the_check_sees_the_linked_folders_and_a_missing_module() -> None:
    found = modules()
    assert "workflows/core/machine.py" in found and "supervisor/decide/policy.py" in found
    assert not is_named("sas/state_store/no_such_module.py", named_on_the_page())
