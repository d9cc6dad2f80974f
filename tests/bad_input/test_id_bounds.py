"""Every id sas derives from a task id fits where it goes (sas/task_models/ids.py states the sums):
idempotency keys in the remote services' header limit and the mirror's column, clean-up
workflow ids in Temporal's, scheduled runs' ids in the task-id rule; and each bound is
refused where it enters, with a clear message."""

from __future__ import annotations

import os
import sys

import pytest
from sqlalchemy import String

from sas.state_store.mirror_tables import Step
from sas.task_models import TaskResult, TaskState, incarnation_key, validate_task_id
from sas.task_models.ids import (
    MAX_INCARNATION,
    MAX_SCHEDULE_ID,
    MAX_STEP_NAME,
    MAX_TASK_ID,
    SCHEDULE_RUN_SUFFIX,
    cleanup_workflow_id,
    reserved_shape,
    scheduled_run_of,
    validate_new_task_id,
    validate_schedule_id,
)
from sas.workflows.core.children import child_task_id
from sas.workflows.definitions import StepDefinition
from sas_demo_services.app import MAX_KEY_LENGTH
from sas_orders.agents import charge
from sas_orders.workflows import ORDER
from tests import cli_process
from tests.helpers import fresh_id
from tests.stack import Stack, order

# Temporal's default limit on a workflow id (limit.maxIDLength).
TEMPORAL_MAX_ID = 1000


def longest_task_id() -> str:
    # ':' is still in a valid task id (a child's, a scheduled run's, one from before new tasks
    # were refused it) and is the key's separator: the worst case for parsing too.
    return validate_task_id(("o:" * MAX_TASK_ID)[:MAX_TASK_ID])


def test_the_longest_keys_fit_the_services_and_the_mirror() -> None:
    task_id = longest_task_id()
    step = "s" * MAX_STEP_NAME
    forward = incarnation_key(f"{task_id}:{step}", MAX_INCARNATION)
    undo = f"{forward}:undo"  # the Scheduler's compensation key (workflows/scheduler.py)
    assert forward == f"{task_id}#{MAX_INCARNATION}:{step}"  # the task part kept whole, ':'s and all
    assert len(undo) <= MAX_KEY_LENGTH
    column = Step.__table__.c.idempotency_key.type
    assert isinstance(column, String) and column.length is not None and len(undo) <= column.length
    assert len(f"cleanup-{task_id}") <= TEMPORAL_MAX_ID
    # A scheduled run's id is <schedule>-<time>; for the longest schedule id it is still a task id.
    validate_task_id("x" * MAX_SCHEDULE_ID + "-2026-11-23T09:00:00Z")
    assert MAX_SCHEDULE_ID + SCHEDULE_RUN_SUFFIX == MAX_TASK_ID
    # Every declared step name is within its bound.
    assert all(len(s.name) <= MAX_STEP_NAME for s in ORDER.steps)


def test_each_bound_is_refused_where_it_enters() -> None:
    with pytest.raises(ValueError, match=r"1-128 characters"):
        validate_task_id("o" * (MAX_TASK_ID + 1))
    with pytest.raises(ValueError, match=rf"at most {MAX_SCHEDULE_ID}"):
        validate_schedule_id("s" * (MAX_SCHEDULE_ID + 1))
    assert validate_schedule_id("s" * MAX_SCHEDULE_ID)
    with pytest.raises(ValueError, match=rf"1-{MAX_STEP_NAME} characters"):
        StepDefinition("s" * (MAX_STEP_NAME + 1), forward=charge)
    with pytest.raises(ValueError, match="step name"):
        StepDefinition("Charge Card", forward=charge)


def derived_ids(task_id: str, step: str = "charge") -> dict[str, str]:
    """Every id sas derives from a task's, as the code that names each builds it (a fan-out's
    batches are named inline in workflows/shell/fanout.py and cleanup_fanout.py)."""
    key = f"{task_id}:{step}"  # the forward step's idempotency key (workflows/shell/acceptance.py)
    return {
        "clean-up": cleanup_workflow_id(task_id),
        "child": child_task_id(task_id, step),
        "child of a later incarnation": child_task_id(task_id, step, 7),
        "child of a long id": child_task_id(task_id + "x" * MAX_TASK_ID, step),
        "batch": f"{key}:batch-1",
        "undo batch": f"{key}:undo-2",
        "clean-up's undo batch": f"{key}:cleanup-undo-3",
        "idempotency key": key,
        "undo key": f"{key}:undo",
        "scheduled run": f"{task_id}-2026-11-23T09:00:00Z",
    }


@pytest.mark.parametrize("task_id", ["order-1", "a", "o" * MAX_TASK_ID, "cleanup", "x.y_z-2026"])
def test_every_id_sas_derives_from_a_new_task_s_is_reserved(task_id: str) -> None:
    assert validate_new_task_id(task_id) == task_id
    for what, derived in derived_ids(task_id).items():
        if len(derived) > MAX_TASK_ID:
            continue  # no task can be given it at all
        assert reserved_shape(derived), what
        with pytest.raises(ValueError, match=r"is reserved: .* give an id without ':' that does not start with"):
            validate_new_task_id(derived)
    # A later incarnation's keys hold '#', which no task id does.
    with pytest.raises(ValueError, match="1-128 characters"):
        validate_new_task_id(incarnation_key(f"{task_id}:charge", 2))


def test_a_reserved_id_is_refused_saying_which_shape_it_has() -> None:
    with pytest.raises(ValueError, match=r"cleanup-<task id> is the id of a task's clean-up workflow"):
        validate_new_task_id("cleanup-order-1")
    with pytest.raises(ValueError, match=r"<schedule id>-<time> is the id Temporal gives each run of a schedule"):
        validate_new_task_id("nightly-2026-11-23T09:00:00Z")
    with pytest.raises(ValueError, match=r"a child task's <task id>:<step>"):
        validate_new_task_id("order-1:charge")
    assert scheduled_run_of("nightly-2026-11-23T09:00:00Z") == "nightly"
    # A run of a schedule no sas schedule could have: not a run's shape (its ':'s are reserved all the same).
    assert scheduled_run_of("a:b-2026-11-23T09:00:00Z") is None and reserved_shape("a:b-2026-11-23T09:00:00Z")


@pytest.mark.parametrize("schedule_id", ["cleanup", "cleanup-nightly", "nightly:charge", "n-2026-11-23T09:00:00Z"])
def test_a_schedule_id_of_a_reserved_shape_or_with_reserved_runs_is_refused(schedule_id: str) -> None:
    with pytest.raises(ValueError, match=rf"schedule id {schedule_id!r} is reserved"):
        validate_schedule_id(schedule_id)


def test_sas_refuses_a_schedule_id_its_runs_would_outgrow() -> None:
    done = cli_process.run(
        [sys.executable, "-m", "sas.cli.main", "schedule", "create", "s" * (MAX_SCHEDULE_ID + 1), "--every", "1d"],
        capture_output=True,
        text=True,
        env={**os.environ, "SAS_TEMPORAL__ADDRESS": "127.0.0.1:9"},  # refused before any connection
        timeout=60,
    )
    assert done.returncode != 0
    assert f"schedule id too long ({MAX_SCHEDULE_ID + 1} characters): at most {MAX_SCHEDULE_ID}" in done.stderr
    assert "Traceback" not in done.stderr


async def test_an_order_with_the_longest_id_runs_and_is_undone_end_to_end(stack: Stack) -> None:
    """The real services take the longest keys: forward calls and their undos."""
    task_id = validate_new_task_id((fresh_id("long") + "-" + "x" * MAX_TASK_ID)[:MAX_TASK_ID])
    handle = await stack.submit(task_id, order(card="4000000000000002"))  # declined: reserve is undone
    result: TaskResult = await handle.result()
    assert result.state == TaskState.COMPENSATED
    ledger = await stack.ledger(task_id)
    assert [(e["service"], e["action"]) for e in ledger] == [("inventory", "reserve"), ("inventory", "release")]
    assert ledger[1]["idempotency_key"] == f"{task_id}:reserve:undo"
