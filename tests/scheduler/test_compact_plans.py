"""A compact plan records only what the accept decided (each step's key, policy and queue where
they are not the common policy's or the declared ones) and reads back as the full plan; a
worker of the code before compact plans fails on one rather than read a plan of no steps."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from sas.payload_codec import data_converter
from sas.settings import WorkerSettings
from sas.task_models import StepPlan, StepPolicyValues, TaskPlan, incarnation_key
from sas_orders.workflows import ORDER

LEAN = data_converter(None).payload_converter
USUAL = StepPolicyValues(complete_by_s=10)
PATIENT = StepPolicyValues(complete_by_s=60, max_attempts=5)


def declared() -> list[StepPlan]:
    return ORDER.step_plans("t-1")


def accepted(**changes: dict[str, object]) -> TaskPlan:
    """The full plan an accept makes of the order's declared steps, each step's changes applied."""
    steps = [p.model_copy(update={"policy": USUAL, **changes.get(p.name, {})}) for p in declared()]
    return TaskPlan(steps=steps, compensation_policy=PATIENT, supervisor_workflow_id="sas-supervisor")


def written(plan: TaskPlan) -> dict[str, Any]:
    [payload] = LEAN.to_payloads([plan])
    return json.loads(payload.data)


def test_a_plan_whose_steps_are_as_declared_with_one_policy_records_that_policy_alone() -> None:
    full = accepted()
    compact = full.compacted(declared())
    assert compact.changes is None and compact.step_policy == USUAL
    assert compact.completed(declared()) == full.steps
    sent = written(compact)
    assert "steps" not in sent and "changes" not in sent and sent["step_policy"]["complete_by_s"] == 10
    assert "incarnation" not in sent  # the first, at its default
    assert len(json.dumps(sent)) < len(json.dumps(written(full))) / 2


@pytest.mark.parametrize(
    "changes",
    [
        {"charge": {"policy": PATIENT}},
        {"ship": {"task_queue": "sas-tasks.shipping"}, "reserve": {"task_queue": "sas-tasks.inventory"}},
        {name: {"idempotency_key": incarnation_key(f"t-1:{name}", 2)} for name in ("reserve", "charge", "ship")},
        {"reserve": {"idempotency_key": "t-1:reserve"}, "charge": {"idempotency_key": "t-1#2:charge"}},
    ],
    ids=["a step's own policy", "service queues", "a later incarnation's keys", "a redrive's kept key"],
)
def test_what_the_accept_decided_beyond_the_declaration_reads_back_as_it_was(changes: dict) -> None:
    full = accepted(**changes)
    compact = full.compacted(declared())
    assert {c.name for c in compact.changes or []} <= set(changes) and compact.changes
    [payload] = LEAN.to_payloads([compact])
    [read] = LEAN.from_payloads([payload], [TaskPlan])
    assert read.completed(declared()) == full.steps


def test_the_most_common_policy_is_the_plans_and_the_others_are_named() -> None:
    full = accepted(reserve={"policy": PATIENT})
    compact = full.compacted(declared())
    assert compact.step_policy == USUAL
    assert [(c.name, c.policy) for c in compact.changes or []] == [("reserve", PATIENT)]


class _PlanBeforeCompact(BaseModel):
    """TaskPlan as a worker of the code before compact plans reads it: its steps are required."""

    steps: list[StepPlan]
    compensation_policy: StepPolicyValues


def test_a_worker_of_the_code_before_fails_on_a_compact_plan_and_reads_a_full_one() -> None:
    with pytest.raises(ValidationError, match="steps"):
        _PlanBeforeCompact.model_validate(written(accepted().compacted(declared())))
    assert len(_PlanBeforeCompact.model_validate(written(accepted())).steps) == 3


def test_compact_plans_are_written_when_versioned_unless_told() -> None:
    assert not WorkerSettings().writes_compact_plans
    assert WorkerSettings(deployment_name="sas", build_id="v2").writes_compact_plans
    assert WorkerSettings(compact_plans=True).writes_compact_plans
    assert not WorkerSettings(deployment_name="sas", build_id="v2", compact_plans=False).writes_compact_plans
