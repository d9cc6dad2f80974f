"""The names a declaration gives, and their shapes: a step's, a task type's, a service's and an
action's. Each is part of activity names, idempotency keys, mirror keys or setting keys
(``SAS_STEPS__<TYPE>__<STEP>__*``), so each is checked when its declaration is made, before any
workflow sees it. A task type's, a service's and an action's name take the shape the settings
take too (``sas.task_models.ids.NAME``)."""

from __future__ import annotations

import re

from sas.task_models.ids import MAX_STEP_NAME, NAME

STEP_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_STEP_NAME - 1}}}")
"""A step's name, and a wait's signal: part of every idempotency key (``sas/task_models/ids.py``)."""


def check_step_name(name: str) -> None:
    """ValueError unless ``name`` can be a step's name."""
    if not STEP_NAME.fullmatch(name):
        raise ValueError(f"step name {name!r}: use 1-{MAX_STEP_NAME} characters from a-z 0-9 _, starting with a letter")


def check_action(service: str, action: str) -> None:
    """ValueError unless ``action`` can be an action's name (``<service>.<action>``)."""
    if not NAME.fullmatch(action):
        raise ValueError(
            f"{service}.{action}: an action is 1-40 characters from a-z 0-9 _ (give action=... for this path)"
        )


def default_workflow_name(task_type: str) -> str:
    """The workflow type Temporal knows a task type's Scheduler by, unless ``task_workflow`` is
    given one: the name in CamelCase plus ``Workflow`` (``approved_trip`` -> ``ApprovedTripWorkflow``),
    a team's under its team (``north.booking`` -> ``north.BookingWorkflow``)."""
    team, dot, name = task_type.rpartition(".")
    return f"{team}{dot}" + "".join(part.capitalize() for part in name.split("_")) + "Workflow"
