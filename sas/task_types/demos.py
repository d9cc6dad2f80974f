"""A demo that ``sas demo`` runs: which task type, each task's input, the faults injected into
it and where it must end. An example package declares its demo as it declares its task types,
by name in an entry point group of its ``pyproject.toml``::

    [project.entry-points."sas.demos"]
    orders = "sas_orders.demo:plan"

The function takes how many tasks the demo runs and returns a :class:`DemoPlan` of that many
cases. Nothing in sas names a demo: ``sas demo`` runs the one installed (``--demo NAME`` picks
one of several), and says in one line when none is.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sas.task_models import TaskState

DEMO_ENTRY_POINT_GROUP = "sas.demos"
"""The entry point group in which a package names its demo's plan function (``pyproject.toml``:
``[project.entry-points."sas.demos"]``, ``orders = "sas_orders.demo:plan"``)."""

# The most tasks one demo runs: the stack is one machine's, the summary one screen.
MAX_DEMO_TASKS = 1000


class DemoCase(BaseModel):
    """One task of a demo: its input, the faults the demo services inject into its calls, and
    the state it must end in for the demo to pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
        description="What the case shows, in a few lowercase words joined by '-': the end of its task id.",
    )
    expected: Literal[TaskState.PROCESSED, TaskState.COMPENSATED, TaskState.ERROR] = Field(
        description="The state the task must end in."
    )
    input: dict[str, Any] = Field(
        default_factory=dict, description="The task input, validated against the task type's model before it starts."
    )
    faults: tuple[dict[str, Any], ...] = Field(
        default=(),
        max_length=20,
        description="Fault rules for the demo services (`POST /admin/faults`), each matched to this task only.",
    )
    what: str = Field(default="", max_length=200, description="What happens to the task, in words, for the summary.")
    terminate_during: str | None = Field(
        default=None,
        description="A step name: the demo terminates the workflow while this step runs, as an "
        "operator might from the UI, and the Supervisor must clean up.",
    )


class DemoPlan(BaseModel):
    """What ``sas demo`` runs: tasks of one type, each a :class:`DemoCase`, and how to read the
    services' ledger afterwards."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_type: str = Field(min_length=1, description="The registered task type every case is a task of.")
    cases: tuple[DemoCase, ...] = Field(min_length=1, max_length=MAX_DEMO_TASKS)
    undo_actions: dict[str, str] = Field(
        default_factory=dict,
        description="Each forward action of the services' ledger and the action that undoes it "
        "(reserve -> release): a completed task has every forward action and no undo, a "
        "compensated one an undo for each forward action done. Empty: only duplicates are checked.",
    )
    noun: str = Field(
        default="tasks", pattern=r"^[a-z][a-z -]{0,19}$", description="What the summary calls the tasks, plural."
    )


class DemoNotFound(Exception):
    """No demo is installed, the one asked for is not, or several are and none was named.
    ``hint`` says what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


class DemoPlanError(Exception):
    """A demo's plan function failed, or returned something that is not a valid plan: one line
    that names the demo and the problem."""


def installed_demos() -> dict[str, Any]:
    """The installed demos: name -> entry point (not loaded)."""
    return {ep.name: ep for ep in entry_points(group=DEMO_ENTRY_POINT_GROUP)}


def load_demo(name: str | None, count: int) -> tuple[str, DemoPlan]:
    """The demo ``name`` (the only one installed if None) and its plan for ``count`` tasks.

    Raises:
        DemoNotFound: When it cannot be told which demo to run.
        DemoPlanError: When its plan function fails or returns an invalid plan.
    """
    demos = installed_demos()
    if name is None:
        if not demos:
            raise DemoNotFound(
                f"no demo is installed (none in the {DEMO_ENTRY_POINT_GROUP} entry point group)",
                "install an example that declares one: pip install -e examples/orders",
            )
        if len(demos) > 1:
            raise DemoNotFound(
                f"{len(demos)} demos are installed: {', '.join(sorted(demos))}", "pick one with --demo NAME"
            )
        [name] = demos
    if name not in demos:
        raise DemoNotFound(f"no demo {name!r} is installed", f"installed: {', '.join(sorted(demos)) or 'none'}")
    try:
        function: Callable[[int], Any] = demos[name].load()
        plan = function(count)
    except Exception as err:  # a team's code: any failure is one line naming the demo
        raise DemoPlanError(f"demo {name!r}: its plan failed: {type(err).__name__}: {err}") from err
    if not isinstance(plan, DemoPlan):
        try:
            plan = DemoPlan.model_validate(plan)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(map(str, first["loc"])) or "plan"
            raise DemoPlanError(f"demo {name!r}: not a valid plan: {where}: {first['msg']}") from None
    if len(plan.cases) != count:
        raise DemoPlanError(f"demo {name!r}: asked for {count} tasks, its plan has {len(plan.cases)}")
    return name, plan
