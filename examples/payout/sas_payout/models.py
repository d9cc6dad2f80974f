"""The payout's input, the notice's, and what their services answer: each step's result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sas.api import ProviderId, StepResultModel, TaskInput

# A payee's id is its item's key in the fan-out (sas: 1-28 of A-Z a-z 0-9 . _ -), and a path
# segment at the bank: stable, whatever the order of the list.
PAYEE_ID = r"^[A-Za-z0-9._-]{1,28}$"


class Recipient(BaseModel):
    """One recipient of a payout: who, and how much, in the payout's currency."""

    model_config = ConfigDict(extra="forbid")

    payee_id: str = Field(pattern=PAYEE_ID, description="The payee's stable id at the bank, e.g. emp-0042.")
    amount_cents: int = Field(ge=1, le=100_000_000, strict=True)


class PayoutInput(TaskInput):
    """A payout: each of ``recipients`` paid in ``currency``; then a notice to each, by ``channel``."""

    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217, e.g. EUR.")
    recipients: list[Recipient] = Field(min_length=1, max_length=1000)
    channel: str = Field(
        default="email", pattern=r"^[a-z]{1,20}$", description="How the notices go: email, sms, letter."
    )

    @model_validator(mode="after")
    def _each_payee_once(self) -> PayoutInput:
        # A payee's id keys its payment: the same payee twice would be one payment, not two.
        seen: set[str] = set()
        for recipient in self.recipients:
            if recipient.payee_id in seen:
                raise ValueError(f"payee {recipient.payee_id} is listed twice: pay them once, the sum")
            seen.add(recipient.payee_id)
        return self


class NoticeInput(TaskInput):
    """The notices of a payout run: one to each payee paid in ``run_id``, by ``channel``."""

    run_id: str = Field(min_length=1, max_length=200)
    channel: str = Field(default="email", pattern=r"^[a-z]{1,20}$")


class RunValidated(StepResultModel):
    """``payout_runs.validate``: the bank's record of the run, open for payments."""

    run_id: ProviderId
    recipients: int
    total_cents: int


class RunClosed(StepResultModel):
    """``payout_runs.close``."""

    closed: bool


class Paid(StepResultModel):
    """``payout_bank.pay``: one recipient's payment."""

    payment_id: ProviderId
    amount_cents: int


class Reversed(StepResultModel):
    """``payout_bank.reverse``."""

    reversed: bool


class NoticesSent(StepResultModel):
    """``payout_notices.send``: the notices of the run, one per payee paid."""

    notice_id: ProviderId
    sent: int


class NoticesWithdrawn(StepResultModel):
    """``payout_notices.withdraw``."""

    withdrawn: bool
