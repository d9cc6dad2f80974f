"""A task type whose parallel group has a branch of every kind of member, for the Scheduler's
fast tests of branches: the flight, a layover (a wait for a time), then the seat and the cover
(a conditional step) side by side - beside the hotel; then the charge. Kept apart from the test
module: the workflow sandbox imports this module for every run."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import Parallel, Sequence, StepCall, StepDefinition, StepResult, TaskDefinition, Wait, task_workflow
    from sas.task_models.activity_defs import agent_defn
    from tests.scheduler.kinds import CHARGE, FLIGHT, HOTEL, INSURE, Booked, TripInput


class SeatAgents:
    @agent_defn("testair.seat", Booked)
    async def seat(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testair.unseat", Booked)
    async def unseat(self, call: StepCall) -> StepResult:
        raise NotImplementedError


SEAT = StepDefinition("seat", forward=SeatAgents.seat, undo=SeatAgents.unseat)
LAYOVER = Wait("layover", delay=timedelta(hours=2))
LAYOVER_TRIP = TaskDefinition(
    "layover_trip", TripInput, (Parallel(Sequence(FLIGHT, LAYOVER, Parallel(SEAT, INSURE)), HOTEL), CHARGE)
)
LayoverTripTestWorkflow = task_workflow(LAYOVER_TRIP, "LayoverTripTestWorkflow")
