"""Task types for the Scheduler's fast tests: a trip (a flight and a hotel booked side by side,
then a charge), a trip that waits for an approval first, one with a conditional step, and one
whose charge is its pivot (its point of no return). Each
step calls a test Agent declared here; the tests register fake activities under these names.

Kept apart from the test modules: the workflow sandbox imports this module for every run."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import StepCall, StepResult, TaskResult
    from sas.task_models.activity_defs import agent_defn
    from sas.workflows.definitions import Parallel, StepDefinition, TaskDefinition, Wait, When
    from sas.workflows.scheduler import TaskScheduler


class TripInput(BaseModel):
    traveller: str
    amount_cents: int
    insure: bool = False
    callback_url: str | None = None


class Booked(BaseModel):
    ref: str = ""


class TripAgents:
    @agent_defn("testair.book", Booked)
    async def book_flight(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testair.cancel", Booked)
    async def cancel_flight(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testinn.book", Booked)
    async def book_hotel(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testinn.cancel", Booked)
    async def cancel_hotel(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testcard.charge", Booked)
    async def charge(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testcard.refund", Booked)
    async def refund(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @agent_defn("testcover.cover", Booked)
    async def cover(self, call: StepCall) -> StepResult:
        raise NotImplementedError


FLIGHT = StepDefinition("flight", forward=TripAgents.book_flight, undo=TripAgents.cancel_flight)
HOTEL = StepDefinition("hotel", forward=TripAgents.book_hotel, undo=TripAgents.cancel_hotel)
CHARGE = StepDefinition("charge", forward=TripAgents.charge, undo=TripAgents.refund)
INSURE = StepDefinition(
    "insure", forward=TripAgents.cover, when=When(lambda ctx: bool(ctx.input["insure"]), "no insurance asked for")
)
APPROVAL = Wait("approval", signal="approve", deadline=timedelta(days=3))
APPROVAL_OR_GO = Wait("approval", signal="approve", deadline=timedelta(days=3), on_deadline="continue")

TRIP = TaskDefinition("trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE, INSURE))
APPROVED_TRIP = TaskDefinition("approved_trip", TripInput, (APPROVAL, Parallel(FLIGHT, HOTEL), CHARGE))
RELAXED_TRIP = TaskDefinition("relaxed_trip", TripInput, (APPROVAL_OR_GO, CHARGE))
LATER_TRIP = TaskDefinition("later_trip", TripInput, (Wait("cool_off", delay=timedelta(days=2)), CHARGE))
# The charge is the point of no return; the cover after it is forward only (no undo).
COVER = StepDefinition("cover", forward=TripAgents.cover)
PIVOT_TRIP = TaskDefinition("pivot_trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE, COVER), pivot="charge")


@workflow.defn(name="TripTestWorkflow")
class TripWorkflow(TaskScheduler):
    definition = TRIP

    @workflow.run
    async def run(self, trip: RawValue) -> TaskResult:
        return await self.execute(trip)


@workflow.defn(name="ApprovedTripTestWorkflow")
class ApprovedTripWorkflow(TaskScheduler):
    definition = APPROVED_TRIP

    @workflow.run
    async def run(self, trip: RawValue) -> TaskResult:
        return await self.execute(trip)


@workflow.defn(name="RelaxedTripTestWorkflow")
class RelaxedTripWorkflow(TaskScheduler):
    definition = RELAXED_TRIP

    @workflow.run
    async def run(self, trip: RawValue) -> TaskResult:
        return await self.execute(trip)


@workflow.defn(name="LaterTripTestWorkflow")
class LaterTripWorkflow(TaskScheduler):
    definition = LATER_TRIP

    @workflow.run
    async def run(self, trip: RawValue) -> TaskResult:
        return await self.execute(trip)


@workflow.defn(name="PivotTripTestWorkflow")
class PivotTripWorkflow(TaskScheduler):
    definition = PIVOT_TRIP

    @workflow.run
    async def run(self, trip: RawValue) -> TaskResult:
        return await self.execute(trip)


ALL = [TripWorkflow, ApprovedTripWorkflow, RelaxedTripWorkflow, LaterTripWorkflow, PivotTripWorkflow]
