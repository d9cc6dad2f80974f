"""A team's own names: its services and task types are named under it (``north.flights``,
``north.booking``), so two teams' of the same names load side by side; only its own types call
its services; its services' settings are under the team; a worker runs one team's types with
``SAS_TASK_TYPES__RUN=<team>.*``. Anything without a team keeps today's names."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sas.api import ChildTask, Service, StepDefinition, TaskDefinition, task_workflow
from sas.settings import Settings
from sas.task_models.queues import service_of
from sas.task_models.sdk_internals import workflow_name_of
from sas.task_types.discovery import TaskTypeError, discover
from tests.task_types.test_teams_apart import write

TEAMS = ("tests.e2e.team_north", "tests.e2e.team_south")


class Note(BaseModel):
    text: str


class Sent(BaseModel):
    note_id: str


def test_a_team_s_service_and_task_type_are_named_under_it() -> None:
    flights = Service("flights", team="north", lookup="/{service}/lookup")
    assert (flights.name, flights.short_name) == ("north.flights", "flights")
    # The service itself is called by its own name at its URL: the team is sas's, not its.
    assert flights.lookup_path == "/flights/lookup"
    send = StepDefinition("send", forward=flights.post("/flights/hold", body={}, result=Sent), read_only=True)
    assert send.agent == "north.flights.hold" and service_of(send.agent) == "north.flights"
    booking = TaskDefinition("booking", Note, (send,), team="north")
    assert (booking.task_type, booking.short_name) == ("north.booking", "booking")
    made = task_workflow(booking)
    assert made.__name__ == "BookingWorkflow" and workflow_name_of(made) == "north.BookingWorkflow"
    # Without a team, today's names.
    assert Service("flights").name == "flights" and TaskDefinition("booking", Note, (send,)).task_type == "booking"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Service("flights", team="North"), "team 'North': use 1-40 characters"),
        (lambda: Service("flights", team="n" * 35), "take at most 40 characters"),
        (lambda: Service("air.flights"), "service name 'air.flights': use 1-40 characters"),
    ],
)
def test_a_team_name_that_cannot_be_one_is_refused(make, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=said):
        make()


def test_two_teams_flights_and_booking_load_side_by_side() -> None:
    found = discover(TEAMS)
    assert {"north.booking", "south.booking"} <= set(found.types)
    assert {"north.flights", "south.flights"} <= set(found.services)
    assert {"north.flights.book", "south.flights.book", "south.flights.cancel"} <= set(found.agents)


def test_only_the_team_s_own_types_call_its_service(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(tmp_path))
    borrower = write(
        tmp_path,
        """
        from sas.api import TaskDefinition, task_workflow
        from sas_trip.models import TripInput
        from tests.e2e.team_north import FLIGHT
        BORROWED = TaskDefinition("borrowed", TripInput, (FLIGHT,), team="south")
        BorrowedWorkflow = task_workflow(BORROWED)
        """,
        package="team_south_pkg",
    )
    with pytest.raises(TaskTypeError) as refused:
        discover((borrower,))
    said = str(refused.value)
    assert "calls 'north.flights.book' on service 'north.flights', team north's own" in said
    assert len(said.splitlines()) == 1


def test_a_team_named_like_sas_s_own_activities_is_refused(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(tmp_path))
    module = write(
        tmp_path,
        """
        from sas.api import Service, StepDefinition, TaskDefinition, task_workflow
        from sas_trip.models import FlightBooked, TripInput
        AIR = Service("air", team="child")
        FLY = StepDefinition("fly", forward=AIR.post("/air/book", body={}, result=FlightBooked), read_only=True)
        FlyWorkflow = task_workflow(TaskDefinition("fly", TripInput, (FLY,), team="child"))
        """,
    )
    with pytest.raises(TaskTypeError, match="team 'child' is the name of sas's own activities"):
        discover((module,))


def test_a_worker_runs_one_team_s_types() -> None:
    north = discover(TEAMS, only=("north.*",))
    assert [name for name in north.types if name.endswith(".booking")] == ["north.booking"]
    with pytest.raises(TaskTypeError, match=r"SAS_TASK_TYPES__RUN names task type 'east\.\*'"):
        discover(TEAMS, only=("east.*",))
    with pytest.raises(ValueError, match="nor a team's types"):
        Settings(task_types={"run": ["North.*"]})


def test_a_team_s_services_settings_are_under_the_team(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAS_SERVICES__URL", "http://127.0.0.1:8081")
    monkeypatch.setenv("SAS_TEAMS__NORTH__SERVICES__FLIGHTS__URL", "http://127.0.0.1:9001")
    monkeypatch.setenv("SAS_TEAMS__SOUTH__SERVICES__FLIGHTS__URL", "http://127.0.0.1:9002")
    monkeypatch.setenv("SAS_TEAMS__SOUTH__SERVICES__FLIGHTS__OWN_QUEUE", "true")
    settings = Settings()
    north, south = settings.services.service("north.flights"), settings.services.service("south.flights")
    assert (north.url, south.url) == ("http://127.0.0.1:9001", "http://127.0.0.1:9002")
    assert (north.own_queue, south.own_queue) == (False, True)
    # A platform's flights is neither team's.
    assert settings.services.service("flights").url == "http://127.0.0.1:8081"
    # Its types' step policies and ladders too, found where a platform type's are.
    monkeypatch.setenv("SAS_TEAMS__NORTH__STEPS__BOOKING__FLIGHT__COMPLETE_BY_S", "20")
    monkeypatch.setenv("SAS_TEAMS__NORTH__LADDERS__BOOKING__COOLDOWN_S", "30")
    settings = Settings()
    override = settings.step_override("north.booking", "flight")
    assert override is not None and override.complete_by_s == 20
    assert settings.step_override("south.booking", "flight") is None
    assert settings.supervisor.ladder_for("north.booking", "flight").cooldown_s == 30
    assert settings.supervisor.ladder_for("south.booking", "flight").cooldown_s != 30
    monkeypatch.setenv("SAS_TEAMS__NORTH__SERVICES__AIR-LINE__URL", "http://127.0.0.1:9003")
    with pytest.raises(ValueError, match="SAS_TEAMS__NORTH__SERVICES__AIR-LINE"):
        Settings()


async def test_a_team_s_child_step_runs_its_team_s_type_by_its_scoped_name() -> None:
    from sas.api.testing import FakeAgents, check_failure_matrix, run_task, time_skipping_environment
    from tests.e2e.team_north import BookingWorkflow
    from tests.task_types.team_child_types import RETURN_TRIP, ReturnTripWorkflow

    assert workflow_name_of(ReturnTripWorkflow) == "north.ReturnTripWorkflow"
    back = RETURN_TRIP.step("back")
    assert isinstance(back, ChildTask) and back.workflow_type == "north.BookingWorkflow"
    trip = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 2}
    answers = {"north.flights.book": {"booking_id": "fl_1", "fare_cents": 12_000}}
    env = await time_skipping_environment()
    try:
        agents = FakeAgents(answers=dict(answers))
        result = await run_task(
            env, ReturnTripWorkflow, trip, agents, task_id="north-trip-1", children=[BookingWorkflow], timeout_s=30
        )
        assert str(result.state) == "Processed"
        assert [(n, c.task_id) for n, c in agents.calls] == [
            ("north.flights.book", "north-trip-1"),
            ("north.flights.book", "north-trip-1:back"),
        ]
        cases = await check_failure_matrix(env, ReturnTripWorkflow, trip, answers=answers, children=[BookingWorkflow])
        assert "back: flight refused" in {c.name for c in cases}
    finally:
        await env.shutdown()


def test_a_team_s_service_no_agent_calls_is_refused_naming_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_settings import SettingsError

    from sas.activities import check_service_names
    from sas.task_models.ids import service_settings

    assert service_settings("north.flights") == "SAS_TEAMS__NORTH__SERVICES__FLIGHTS"
    assert service_settings("flights") == "SAS_SERVICES__FLIGHTS"
    monkeypatch.setenv("SAS_TEAMS__NORTH__SERVICES__FERRIES__URL", "http://127.0.0.1:9004")
    with pytest.raises(SettingsError, match=r"SAS_TEAMS__NORTH__SERVICES__FERRIES__\*: no Agent calls a service named"):
        check_service_names(Settings().services)


def test_a_misspelt_team_type_step_setting_names_the_setting_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_settings import SettingsError

    from sas.activities import check_step_settings

    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", ",".join(TEAMS))
    monkeypatch.setenv("SAS_TEAMS__NORTH__STEPS__BOOKNG__FLIGHT__COMPLETE_BY_S", "20")
    with pytest.raises(SettingsError, match=r"^SAS_TEAMS__NORTH__STEPS__BOOKNG__FLIGHT__\*: no task type is named"):
        check_step_settings(Settings())
    monkeypatch.delenv("SAS_TEAMS__NORTH__STEPS__BOOKNG__FLIGHT__COMPLETE_BY_S")
    monkeypatch.setenv("SAS_TEAMS__NORTH__STEPS__BOOKING__FLIHGT__COMPLETE_BY_S", "20")
    with pytest.raises(SettingsError, match=r"SAS_TEAMS__NORTH__STEPS__BOOKING__FLIHGT__\*: task type 'north.booking'"):
        check_step_settings(Settings())


def test_a_team_s_child_step_is_of_sas_s_own_child_service_and_its_lookup_checked_by_its_own_name() -> None:
    from sas.conformance.target import ExplicitCalls, explicit_target

    assert service_of("child.north.booking") == "child" and service_of("wait.approve") == "wait"
    calls = ExplicitCalls(forward="/flights/book", body={}, undo="/flights/cancel", lookup="/{service}/find")
    target = explicit_target("north.flights", calls, discover(TEAMS), None)
    assert "/flights/find" in repr(target) and "/north.flights/" not in repr(target)


def test_two_teams_classes_of_one_name_are_not_guessed_between(monkeypatch: pytest.MonkeyPatch) -> None:
    import sas.workflows
    from sas.settings import get_settings
    from sas.workflows import registry

    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", ",".join(TEAMS))
    get_settings.cache_clear()
    registry.refresh()
    try:
        with pytest.raises(AttributeError, match="more than one task type's workflow"):
            sas.workflows.BookingWorkflow  # noqa: B018 - the lookup is what is tested
    finally:
        monkeypatch.delenv("SAS_TASK_TYPES__MODULES")
        get_settings.cache_clear()
        registry.refresh()
