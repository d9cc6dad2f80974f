"""What a task type's input model can build on."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sas.task_models.outbound import validate_outbound_url


class TaskInput(BaseModel):
    """Base of a task type's input model.

    A misspelt field is refused, not dropped (``extra="forbid"``); text is stripped of surrounding
    spaces. ``callback_url``, when given, is where the task's status events are posted (signed,
    docs/webhooks.md); it is checked against ``SAS_OUTBOUND__*`` when the task is submitted with
    ``sas submit`` and again when each event is sent.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    callback_url: str | None = Field(
        default=None,
        max_length=2000,
        description="Where status events are posted; checked against SAS_OUTBOUND__* (see sas/task_models/outbound.py).",
    )

    # The shape always; the outbound policy too when the client passes it as validation context.
    _callback_url_allowed = field_validator("callback_url")(validate_outbound_url)
