"""The escalation ladder, declared once: the Supervisor's defaults (``SAS_SUPERVISOR__*``), each
task type's and step's overrides (``SAS_SUPERVISOR__LADDERS__…``) and the resolved ladder a due
step carries into ``sas.supervisor.decide.policy`` are all this one model.

An override is a ``Ladder`` too: only the fields it was given (pydantic's ``model_fields_set``)
replace the ones below it, so no second, all-optional copy of the fields is needed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

LadderOutcome = Literal["compensate", "park"]


class Ladder(BaseModel):
    """One step's escalation ladder: R retries, then K cool-down tries, then the outcome."""

    retries: int = Field(
        default=2,
        ge=0,
        description="R: Supervisor-driven retries after the step Failed"
        " (the defaults' R is failure_threshold - 1 unless set).",
    )
    retry_delay_s: float = Field(default=1.0, ge=0, description="Wait before the first of those retries.")
    retry_backoff: float = Field(default=2.0, ge=1.0, description="Each further retry waits this much longer.")
    retry_max_delay_s: float = Field(default=300.0, ge=0, description="Longest wait between retries.")
    # A long outage of a remote service is waited out, not turned into refunds: after the quick
    # retries, three tries five minutes apart carry a task through a 10-minute outage.
    cooldown_s: float = Field(
        default=300.0, ge=0, le=7 * 86400, description="C: wait before each cool-down try (hours in production)."
    )
    cooldown_tries: int = Field(
        default=3, ge=0, le=1000, description="K: tries after a cool-down, once the retries are spent."
    )
    outcome: LadderOutcome = Field(
        default="compensate",
        description="When every rung is spent: undo the task, or park it as Error for an operator.",
    )

    def given(self) -> dict[str, object]:
        """The rungs this ladder was given, as an override of the ones below it."""
        return self.model_dump(include=self.model_fields_set & set(Ladder.model_fields))

    def resolved(self) -> Ladder:
        """Only the ladder's own fields (a settings group that holds them carries more)."""
        return Ladder.model_validate(self.model_dump(include=set(Ladder.model_fields)))

    def overlaid(self, *overrides: Ladder | None) -> Ladder:
        """This ladder with each override's given rungs on top, in order."""
        resolved = self.resolved()
        for override in overrides:
            if override is not None:
                resolved = resolved.model_copy(update=override.given())
        return resolved
