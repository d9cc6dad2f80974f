"""Inputs of the task types sas ships with."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sas.task_models.outbound import validate_outbound_url
from sas.task_models.text import UserText


class PreorderInput(BaseModel):
    """A pre-order: reserve stock and take payment now, ship later (a second, tiny task type)."""

    # extra="forbid": a misspelt field is an error, not silently dropped data.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    customer_id: str = Field(min_length=1, max_length=100, pattern=r"^[\x20-\x7e]+$")
    sku: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    quantity: int = Field(gt=0, le=10_000, strict=True)  # strict: JSON true is not 1
    amount_cents: int = Field(gt=0, le=100_000_000, strict=True)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
    card: str = Field(default="4242424242424242", pattern=r"^[0-9]{12,19}$")
    callback_url: str | None = Field(
        default=None,
        max_length=2000,
        description="Where status events are posted; checked against SAS_OUTBOUND__* (see sas/task_models/outbound.py).",
    )

    # The shape always; the outbound policy too when the client passes it as validation context.
    _callback_url_allowed = field_validator("callback_url")(validate_outbound_url)


class OrderInput(PreorderInput):
    """An order: reserve stock, charge the card, ship. The task id is the workflow id."""

    address: UserText = Field(min_length=1, max_length=500)
    # Optional, so an order without it (and a workflow started before it) ships as one parcel.
    parcels: int = Field(
        default=1,
        ge=1,
        le=50,
        strict=True,
        description="Parcels the shipment is split into; each is shipped by its own call, and a "
        "retried ship step resumes after the last parcel done.",
    )
