"""The private parts of temporalio that sas reads, in one narrow place.

temporalio keeps an activity's or a workflow's registered name on a private ``_Definition``;
there is no public way to read it from a decorated function or class. sas needs it to name an
Agent by its declaration and a task type's workflow by its class. Everything that reads it goes
through here, so a change in the SDK is one edit (the workflow sandbox's own internals, which
sas's runner customises, stay in ``workflows/runner.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity, workflow


def activity_name_of(fn: Callable[..., Any]) -> str | None:
    """The name ``fn`` is registered under as an activity; None if it is not one (or dynamic)."""
    definition = activity._Definition.from_callable(fn)
    return None if definition is None else definition.name


def workflow_name_of(cls: type) -> str | None:
    """The workflow type name ``cls`` is registered under; None if it is not a workflow (or dynamic)."""
    definition = workflow._Definition.from_class(cls)
    return None if definition is None else definition.name
