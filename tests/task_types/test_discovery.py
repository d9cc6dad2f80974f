"""A team's task types are found without an edit to sas (a module named by the setting here;
an entry point in tests/examples), and what cannot work is refused with one line naming the
module and the problem."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import pytest
from temporalio import activity, workflow

from sas import workflows
from sas.activities import by_service
from sas.activities.services import AGENTS
from sas.task_types.discovery import RESERVED_SERVICES, RESERVED_WORKFLOWS, TaskTypeError
from sas.task_types.services import HttpCall, Service
from sas.workflows import registry
from sas.workflows.summaries import task_details, task_summary
from tests.task_types.conftest import Register, trip_module


def test_a_module_named_by_the_setting_is_a_task_type_everywhere(register: Register) -> None:
    (module,) = register(trip_module())
    tour = registry.task_types()["tour"]
    assert tour.module == module and tour.workflow_name == "TourWorkflow"
    assert tour.workflow in workflows.ALL_WORKFLOWS  # what the worker registers
    assert registry.by_workflow_name("TourWorkflow") is tour
    # Its services and their calls declared as data: what the worker builds Agents for.
    assert {"air", "inn"} <= set(AGENTS)
    assert [c.name for c in AGENTS["air"].calls] == ["air.book", "air.cancel"]
    assert [c.name for c in AGENTS["inn"].calls] == ["inn.book", "inn.cancel", "inn.note"]
    assert all(isinstance(c, HttpCall) for c in AGENTS["inn"].calls)
    # The UI's summaries read its definition.
    assert task_summary(tour.definition, "t-1", {"traveller": "Ada"}).endswith("(flight ‖ hotel) → note")
    assert "`air.book`, undone by `air.cancel`" in task_details(tour.definition, "t-1", {})


def test_the_order_example_and_a_team_type_live_side_by_side(register: Register) -> None:
    register(trip_module())
    assert {"order", "preorder", "trip", "tour"} <= set(registry.task_types())
    grouped = by_service([])
    assert {"inventory", "payment", "shipping", "air", "inn"} <= set(grouped)


def test_the_workflow_class_has_the_name_the_sandbox_imports_it_by(register: Register) -> None:
    register(trip_module(workflow="TourWorkflow").replace("TourWorkflow = task_workflow", "Tour = task_workflow"))
    with pytest.raises(TaskTypeError, match="named 'TourWorkflow' but not bound to that name"):
        registry.task_types()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda m: m.replace("from sas.api import", "import no_such_package\nfrom sas.api import"),
            "cannot be imported: ModuleNotFoundError",
        ),
        (lambda m: "X = 1\n", "declares no task type"),
        (
            lambda m: m.replace('Result("flight", "booking_id")', 'Result("note", "booking_id")'),
            "must name a step that finishes before",
        ),
        (lambda m: m.replace('Input("nights")', 'Input("nigths")'), "Input('nigths') is not a field of TourInput"),
        (
            lambda m: m.replace('"key": ForwardKey()', '"key": ForwardKey(), "x": Result("flight", "booking_id")'),
            "an undo gets its own step's result",
        ),
        (lambda m: m.replace('"trip": TaskId()', '"trip": Forward("booking_id")'), "Forward is for an undo only"),
        (
            lambda m: m.replace('Forward("booking_id"), "key"', 'Forward("bookingid"), "key"'),
            "Forward('bookingid') is not a field of Booked",
        ),
        (
            lambda m: m.replace('undo=INN.post("/inn/cancel"', 'undo=AIR.post("/inn/cancel"'),
            "undone on service 'air' but runs on 'inn'",
        ),
    ],
    ids=[
        "import fails",
        "no task type",
        "later result",
        "unknown input",
        "result in undo",
        "forward in forward",
        "unknown forward field",
        "undo elsewhere",
    ],
)
def test_a_registration_that_cannot_work_is_one_line_naming_the_module(
    register: Register, change, problem: str
) -> None:  # type: ignore[no-untyped-def]
    (module,) = register(change(trip_module()))
    with pytest.raises(TaskTypeError, match=re.escape(problem)) as refused:
        registry.task_types()
    line = str(refused.value)
    assert module in line and "\n" not in line


def test_two_task_types_of_one_name_are_refused(register: Register) -> None:
    first, second = register(trip_module(), trip_module(workflow="OtherTripWorkflow"))
    with pytest.raises(TaskTypeError, match=f"task type 'tour' is declared twice: by {first} and by {second}"):
        registry.task_types()


def test_two_workflow_types_of_one_name_are_refused(register: Register) -> None:
    register(trip_module(), trip_module(task_type="safari"))
    with pytest.raises(
        TaskTypeError, match="workflow type 'TourWorkflow' of task type 'safari' is already task type 'tour'"
    ):
        registry.task_types()


def test_a_task_type_named_like_a_service_is_refused(register: Register) -> None:
    (module,) = register(trip_module(task_type="inn"))
    with pytest.raises(TaskTypeError, match=f"{module}: task type 'inn' has the name of a service"):
        registry.task_types()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda: trip_module(workflow="SupervisorWorkflow"),
            "workflow type 'SupervisorWorkflow' is the name of sas's own workflow",
        ),
        (
            lambda: trip_module(workflow="CleanupWorkflow"),
            "workflow type 'CleanupWorkflow' is the name of sas's own workflow",
        ),
        (
            lambda: trip_module().replace('Service("air")', 'Service("mirror")').replace("/air/book", "/mirror/accept"),
            "Agent 'mirror.accept' of step 'flight' is on service 'mirror', whose activities are sas's own",
        ),
        (
            lambda: trip_module().replace('Service("inn", lookup=None)', 'Service("callback", lookup=None)'),
            "Agent 'callback.book' of step 'hotel' is on service 'callback', whose activities are sas's own",
        ),
        (
            lambda: trip_module().replace('Service("air")', 'Service("supervisor")'),
            "Agent 'supervisor.book' of step 'flight' is on service 'supervisor', whose activities are sas's own",
        ),
    ],
    ids=["SupervisorWorkflow", "CleanupWorkflow", "mirror.accept", "callback.*", "supervisor.*"],
)
def test_a_name_of_sas_s_own_is_refused_when_the_type_loads(
    register: Register, change: Callable[[], str], problem: str
) -> None:
    # Before, these passed discovery; the worker then registered two activities or workflows of
    # one name and stopped with a traceback.
    (module,) = register(change())
    with pytest.raises(TaskTypeError, match=re.escape(problem)) as refused:
        registry.task_types()
    line = str(refused.value)
    assert line.startswith(f"{module}: task type 'tour': ") and "\n" not in line


def test_the_reserved_names_are_sas_s_own_registrations() -> None:
    """Every activity and workflow sas registers beside the task types is covered by the rule."""
    from sas.supervisor import activity_defs as supervisor_defs
    from sas.supervisor.run.workflow import SupervisorWorkflow
    from sas.task_models.activity_defs import CallbackDefs, CleanupDefs, MirrorDefs
    from sas.workflows.cleanup import CleanupWorkflow
    from sas.workflows.fanout_batch import FanOutBatchWorkflow

    activities = [
        defn.name
        for cls in (
            MirrorDefs,
            CallbackDefs,
            CleanupDefs,
            *[v for v in vars(supervisor_defs).values() if isinstance(v, type)],
        )
        for member in vars(cls).values()
        if (defn := activity._Definition.from_callable(member)) is not None and defn.name
    ]
    assert len(activities) >= 9
    assert all(name.partition(".")[0] in RESERVED_SERVICES for name in activities), activities
    ours = (SupervisorWorkflow, CleanupWorkflow, FanOutBatchWorkflow)
    workflows_of_sas = {workflow._Definition.must_from_class(c).name for c in ours}
    assert workflows_of_sas == set(RESERVED_WORKFLOWS)


def test_one_agent_name_declared_as_two_calls_is_refused(register: Register) -> None:
    # One package, one service: two of its types name one Agent for two different calls.
    safari = (
        'FLIGHT2 = StepDefinition("flight", forward=AIR.post("/air/v2/book", body={}, result=Booked),'
        " undo=FLIGHT.undo)\n"
        'SAFARI = TaskDefinition("safari", TourInput, (FLIGHT2,))\n'
        'SafariWorkflow = task_workflow(SAFARI, "SafariWorkflow")\n'
    )
    register(trip_module() + safari)
    with pytest.raises(
        TaskTypeError, match=re.escape("Agent 'air.book' of task type 'safari' is declared differently by task type")
    ):
        registry.task_types()


def test_a_service_with_a_missing_agent_class_is_refused(register: Register) -> None:
    hand_written = trip_module(
        extra=(
            'PAY = Service("pay", agent="no_such_module:PayAgent")\n'
            "class PayDefs:\n"
            '    @PAY.agent_defn("charge", Booked)\n'
            "    async def charge(self, call): raise NotImplementedError\n"
            'NOTE = StepDefinition("note", forward=PayDefs.charge, irreversible="a test charge")\n'
        )
    )
    register(hand_written)
    registry.task_types()  # the task type itself is fine: its Agents are the worker's business
    with pytest.raises(
        TaskTypeError, match="service 'pay': its Agent class 'no_such_module:PayAgent' cannot be loaded"
    ):
        dict(AGENTS)


def test_a_service_of_the_older_agent_form_says_once_what_to_move_to() -> None:
    with pytest.warns(FutureWarning) as said:
        Service("pay", agent="my_team.agents:PayAgent")
    [line] = [str(w.message) for w in said]
    assert "deprecated and goes in sas 1.0" in line and '@PAY.action("<action>", Result)' in line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Service("pay")  # the one form: nothing to say
