"""A step's status changes in one place, the Scheduler's core (``workflows/core/machine.py``):
the shell asks the core for each change and never assigns a status field itself, so each rule of
a step's status (FailureCount never goes down, a Processed step is counted as completed, a park
says the task needs an operator) has one home.

Read from the workflow modules' source, so it holds on the paths no test runs too."""

from __future__ import annotations

import ast
from pathlib import Path

from sas.task_models import StepStatus, TaskStatus

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
CORE = WORKFLOWS / "core"
# Every field of a step's status and of the task's. The task's event log is not a state: the
# run's one outlet for it is TaskRun.event, which bounds it.
FIELDS = set(StepStatus.model_fields) | set(TaskStatus.model_fields) - {
    "task_id",
    "task_type",
    "steps",
    "events",
    "events_dropped",
}


def assigned_fields(path: Path, base: Path = WORKFLOWS.parent) -> list[str]:
    """Each ``x.<field> = …`` (or ``+=``) in ``path`` whose target is not ``self``'s own attribute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign):
            targets = [
                t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            ]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            if not isinstance(target, ast.Attribute) or target.attr not in FIELDS:
                continue
            if isinstance(target.value, ast.Name) and target.value.id == "self":
                continue  # a collaborator's own attribute of the same name
            found.append(f"{path.relative_to(base)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_core_assigns_a_step_or_task_status_field() -> None:
    outside = [
        line for path in sorted(WORKFLOWS.rglob("*.py")) if CORE not in path.parents for line in assigned_fields(path)
    ]
    assert outside == [], "the shell changes a status field itself; ask TaskCore.set (or its siblings):\n" + "\n".join(
        outside
    )


def test_the_check_sees_an_assignment_the_shell_would_make(tmp_path: Path) -> None:
    # The check itself can fail: a note, a FailureCount and a tuple assignment are each found.
    sample = tmp_path / "shell_sample.py"
    sample.write_text("step.note = 'x'\nstep.failure_count += 1\nstep.note, step.wait_until = 1, 2\nself.note = 3\n")
    assert [line.split(": ", 1)[1] for line in assigned_fields(sample, tmp_path)] == [
        "step.note = 'x'",
        "step.failure_count += 1",
        "step.note, step.wait_until = (1, 2)",
        "step.note, step.wait_until = (1, 2)",
    ]
