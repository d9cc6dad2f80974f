"""Task type modules written for a test, registered the way code that is not installed is:
on the path, named by ``SAS_TASK_TYPES__MODULES``."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sas.settings import get_settings
from sas.workflows import registry

# A trip over two services of its own, declared as data: what most tests below change a little.
TRIP = """
from sas.api import (
    Forward, ForwardKey, Input, Parallel, Result, Service, StepDefinition, StepResultModel,
    TaskDefinition, TaskInput, TaskId, task_workflow,
)

class TourInput(TaskInput):
    traveller: str
    nights: int = 1

class Booked(StepResultModel):
    booking_id: str

class Cancelled(StepResultModel):
    cancelled: bool = True

AIR = Service("{prefix}air")
INN = Service("{prefix}inn", lookup=None)
FLIGHT = StepDefinition(
    "flight",
    forward=AIR.post("/air/book", body={{"traveller": Input("traveller"), "trip": TaskId()}}, result=Booked),
    undo=AIR.post("/air/cancel", body={{"booking_id": Forward("booking_id"), "key": ForwardKey()}}, result=Cancelled),
)
HOTEL = StepDefinition(
    "hotel",
    forward=INN.post("/inn/book", body={{"nights": Input("nights")}}, result=Booked),
    undo=INN.post("/inn/cancel", body={{"booking_id": Forward("booking_id")}}, result=Cancelled),
)
NOTE = StepDefinition(
    "note",
    forward=INN.post("/inn/note", body={{"flight": Result("flight", "booking_id")}}, result=Booked),
    irreversible="a note stays on the booking, which its undo cancels",
)
{extra}
TOUR = TaskDefinition("{task_type}", TourInput, (Parallel(FLIGHT, HOTEL), NOTE))
{workflow} = task_workflow(TOUR, "{workflow}")
"""

Register = Callable[..., list[str]]


def trip_module(task_type: str = "tour", workflow: str = "TourWorkflow", prefix: str = "", extra: str = "") -> str:
    return TRIP.format(task_type=task_type, workflow=workflow, prefix=prefix, extra=extra)


@pytest.fixture
def register(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Register]:
    """``register(text, text, ...)``: each text a module of its own, all named by the setting;
    returns their names (fresh for each test: a module is imported once per process)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def add(*texts: str) -> list[str]:
        names = []
        for text in texts:
            name = f"team_types_{uuid.uuid4().hex[:10]}"
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
            names.append(name)
        monkeypatch.setenv("SAS_TASK_TYPES__MODULES", ",".join(names))
        get_settings.cache_clear()
        registry.refresh()
        return names

    yield add
    get_settings.cache_clear()
    registry.refresh()
