"""Every task type this process runs, found where a team registers its own.

A task type is a ``TaskDefinition`` and its ``TaskScheduler`` workflow class
(``sas.api.task_workflow``) in a module that an installed package names in the
``sas.task_types`` entry point group, or that ``SAS_TASK_TYPES__MODULES`` names
(``sas/task_types/discovery.py``). The worker registers their workflows and Agents from here,
and ``sas submit``, ``sas types``, Schedules, the bulk actions, the UI summaries and the
Supervisor find them here. Nothing is cached but per list of modules, so the setting is read
each time and a registration is never missed for having asked too early.
"""

from __future__ import annotations

from collections.abc import Iterable

from sas.task_types.discovery import Catalog, FoundType, TaskTypeError, discover

# A registered task type: its definition, its workflow class, its module and workflow type name.
TaskType = FoundType

__all__ = [
    "TaskType",
    "TaskTypeError",
    "by_workflow_name",
    "catalog",
    "owning_team",
    "refresh",
    "task_types",
    "types_of_team",
]


def catalog(*, lenient: bool = False) -> Catalog:
    """The task types of the installed packages' entry points and of ``SAS_TASK_TYPES__MODULES``,
    with the services and Agents they use; TaskTypeError (one line) if a registration is wrong.
    ``lenient`` (``sas types``): a broken module or type is left out, its line in ``broken``."""
    from sas.settings import get_settings
    from sas.workflows.scheduler import TaskScheduler

    settings = get_settings().task_types
    found = discover(tuple(settings.modules), lenient=lenient, only=tuple(settings.run))
    for task_type in found.types.values():
        if not issubclass(task_type.workflow, TaskScheduler):
            raise TaskTypeError(
                f"{task_type.module}: the workflow of task type {task_type.name!r} is not a TaskScheduler"
                " (make it with sas.api.task_workflow)"
            )
    return found


def task_types() -> dict[str, TaskType]:
    """The registered task types, by name."""
    return catalog().types


def by_workflow_name(name: str) -> TaskType | None:
    return catalog().by_workflow_name(name)


def types_of_team(team: str) -> list[str]:
    """The registered task types ``team`` owns (``TaskDefinition(team=...)``), by name."""
    return sorted(name for name, found in task_types().items() if found.definition.team == team)


def owning_team(names: Iterable[str]) -> str | None:
    """The team that owns what is about these task types (an alert, an incident): the one team
    they all belong to; None when they name none, or several, or a type not registered here
    (then it is the platform's, whose operators see every team's)."""
    types = task_types()
    teams = {types[n].definition.team if n in types else None for n in names}
    return next(iter(teams)) if len(teams) == 1 else None


def refresh() -> None:
    """Forget what was found: entry points installed since are read again (tests)."""
    from sas.activities.services import forget

    discover.cache_clear()
    forget()
