"""Team north's type with a child step of its own team's type (``north.booking``), for
tests/task_types/test_team_names.py: a child named under its team is found and run."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import ChildTask, StepContext, TaskDefinition, task_workflow
    from sas_trip.models import TripInput
    from tests.e2e.team_north import FLIGHT


def the_same_trip(ctx: StepContext) -> dict[str, Any]:
    return dict(ctx.input)


RETURN_TRIP = TaskDefinition(
    "return_trip", TripInput, (FLIGHT, ChildTask("back", task_type="north.booking", input=the_same_trip)), team="north"
)
ReturnTripWorkflow = task_workflow(RETURN_TRIP)
