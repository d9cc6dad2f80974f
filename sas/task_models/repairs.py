"""An operator's repairs of a task, as the Scheduler takes them: a step completed by hand, a step
retried with a changed input, and a step skipped.

A step whose call an operator made some other way (the payment taken over the phone) is
completed with the result the service would have answered, which the Scheduler checks against
the step's result model and keeps like any result: the steps after it read it, and its undo gets
it. It is the sanctioned form of what ``temporal activity complete`` does, which sas refuses
(docs/security.md, "Seals"): an update the Scheduler validates, audited, never a write to the
mirror."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sas.task_models.ids import MAX_STEP_NAME
from sas.task_models.results import MAX_RESULT_BYTES
from sas.task_models.status import OperatorRequest
from sas.task_models.text import UserText

# The audit actions of a step completed by hand, of one retried with a changed input, and of one
# skipped.
COMPLETED_BY_HAND = "complete by hand"
RETRIED_WITH_INPUT = "retry with input"
SKIPPED_BY_OPERATOR = "skip"


class Repair(BaseModel):
    """What every repair carries: the step, who asks and why (kept in the audit log and the
    task's story), and whether it goes past the task's pivot. The core weighs each through
    :meth:`request`, by the one rule of a forward repair (``workflows/core/requests.py``)."""

    model_config = ConfigDict(extra="forbid")

    step: str | None = Field(
        default=None, max_length=MAX_STEP_NAME, description="The step waiting for a decision; None: the only one."
    )
    by: UserText = Field(default="operator", max_length=200)
    reason: UserText = Field(min_length=1, max_length=2000, description="Why, in the audit log and the task's story.")
    force: bool = Field(default=False, description="Past the task's pivot too (with the reason).")

    def request(self) -> OperatorRequest:
        """The request the core weighs (who, why, which step, forced or not)."""
        return OperatorRequest(step=self.step, by=self.by, reason=self.reason, force=self.force)


class StepCompletion(Repair):
    """Payload of the ``request_complete`` update (and the ``check_complete`` query, its dry run)."""

    step: str = Field(min_length=1, max_length=MAX_STEP_NAME, description="The step waiting for a decision.")
    result: dict[str, Any] = Field(description="What its service would have answered: the step's result model.")

    @field_validator("result")
    @classmethod
    def _bounded(cls, result: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(result, ensure_ascii=True, separators=(",", ":"), allow_nan=False))
        if size > MAX_RESULT_BYTES:
            raise ValueError(f"a result of {size:,} bytes as JSON; a step's result may be {MAX_RESULT_BYTES:,}")
        return result


class InputChange(Repair):
    """Payload of the ``request_retry_with_input`` update (and the ``check_retry_with_input``
    query, its dry run): a bad input fixed (a wrong address), then the step that refused it
    retried. The task's input becomes the old one with these fields changed, checked against
    the type's input model; every step called from then on (and each undo) gets it."""

    fields: dict[str, Any] = Field(
        min_length=1, max_length=50, description="The input's top-level fields to change, each to its new value."
    )

    @field_validator("fields")
    @classmethod
    def _bounded(cls, fields: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(fields, ensure_ascii=True, separators=(",", ":"), allow_nan=False))
        if size > MAX_RESULT_BYTES:
            raise ValueError(f"{size:,} bytes of changes as JSON; at most {MAX_RESULT_BYTES:,}")
        return fields


class StepSkip(Repair):
    """Payload of the ``request_skip`` update (and the ``check_skip`` query, its dry run): a failed
    step the task can do without (a gift note the printer refused), where its task type declares
    it ``skippable``. The step becomes Skipped, as a step whose condition was false: the steps after
    it run and find no result of it, and its undo is never called (the operator says it did
    nothing that needs one)."""

    step: str = Field(min_length=1, max_length=MAX_STEP_NAME, description="The step waiting for a decision.")
