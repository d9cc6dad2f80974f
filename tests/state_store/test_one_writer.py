"""Only the one writer (``sas/state_store/mirror_rules.py``) writes ``tasks`` and ``steps``.

The import-linter contracts in pyproject keep the mapped tables out of reach of every module
but the writer and the state store's reads. What imports cannot show, this reads in the source:
no module but the writer builds a statement that writes the two tables (an ``update``,
``insert`` or ``delete`` of ``Task``/``Step``, a new ``Task(...)``/``Step(...)`` row) and no
module spells one in SQL; the migrations, which shape the tables, are the one exception."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "sas" / "state_store" / "mirror_rules.py"
MIGRATIONS = ROOT / "sas" / "state_store" / "migrations" / "versions"
# Raw SQL that writes either table, in any string of the code.
RAW_WRITE = re.compile(
    r"\b(update|insert\s+(or\s+\w+\s+)?into|delete\s+from|replace\s+into)\s+\"?(tasks|steps)\b", re.I
)
_TABLES = {"Task", "Step", "tasks", "steps", "_tasks", "_steps"}
_WRITES = {"update", "insert", "delete"}


def sources() -> list[Path]:
    """Every module of sas, through its links (workflows/, activities/, supervisor/)."""
    found = {p.resolve() for p in (ROOT / "sas").rglob("*.py")}
    for link in (ROOT / "sas").iterdir():
        if link.is_symlink() and link.resolve().is_dir():
            found |= {p.resolve() for p in link.resolve().rglob("*.py")}
    return sorted(p for p in found if MIGRATIONS not in p.parents and p != WRITER)


def _names(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _names(node.value) if node.attr in ("__table__", "c") else node.attr
    return None


def writes_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and RAW_WRITE.search(node.value):
            found.append(f"{path.name}:{node.lineno}: SQL {RAW_WRITE.search(node.value).group(0)!r}")  # type: ignore[union-attr]
        if not isinstance(node, ast.Call):
            continue
        called = _names(node.func)
        first = _names(node.args[0]) if node.args else None
        # update(Step), sqlite_insert(Task.__table__), delete(_steps) ...
        if called and any(w in called.lower() for w in _WRITES) and first in _TABLES:
            found.append(f"{path.name}:{node.lineno}: {called}({first})")
        if called in ("Task", "Step") and node.keywords:
            found.append(f"{path.name}:{node.lineno}: a new {called} row")
    return found


def test_no_module_but_the_writer_writes_tasks_or_steps() -> None:
    checked = sources()
    assert len(checked) > 100  # the links were followed
    assert [w for path in checked for w in writes_in(path)] == []


def test_the_check_sees_each_kind_of_write(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from sqlalchemy import update\n"
        "update(Step).values(state='Error')\n"
        "pg_insert(Task.__table__)\n"
        "session.add(Task(task_id='t'))\n"
        "db.execute('UPDATE steps SET state=? WHERE task_id=?')\n"
        "db.execute('insert or ignore into tasks (task_id) values (?)')\n"
    )
    assert len(writes_in(probe)) == 5
    assert writes_in(WRITER)  # the writer itself writes, and is the one exempted
