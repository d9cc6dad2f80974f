"""Whom this process's operator acts for (``SAS_OPERATOR__TEAM``): a team's operators set it in
their own environment, and their ``TaskClient`` and ``sas`` then act on that team's tasks only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sas.task_models.ids import NAME


class OperatorSettings(BaseModel):
    """The operator this process acts as (``SAS_OPERATOR__TEAM=payments``)."""

    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(
        default=None,
        description="The team this process's operator acts for: every action of its TaskClient and of `sas` (retry,"
        " compensate, park, resubmit, redrive, the repairs, approve, reject, cancel, reschedule, submit, bulk) is"
        " refused on a task of another team's type, a bulk selection keeps the team's tasks only, `sas list`,"
        " `alerts` and `incidents` show the team's, and each audit entry names the team. Unset: every team's"
        " (the platform's operators).",
    )

    @field_validator("team", mode="before")
    @classmethod
    def _a_team_name(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.lower()
            if not NAME.fullmatch(value):
                raise ValueError("a team is 1-40 characters from a-z 0-9 _, starting with a letter")
        return value
