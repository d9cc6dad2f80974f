"""The order example's inputs, and what its services answer (each step's result)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sas.api import ProviderId, Secret, StepResultModel, TaskInput, UserText


class PreorderInput(TaskInput):
    """A pre-order: reserve stock and take payment now, ship later."""

    customer_id: str = Field(min_length=1, max_length=100, pattern=r"^[\x20-\x7e]+$")
    sku: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    quantity: int = Field(gt=0, le=10_000, strict=True)  # strict: JSON true is not 1
    amount_cents: int = Field(gt=0, le=100_000_000, strict=True)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
    card: str = Field(default="4242424242424242", pattern=r"^[0-9]{12,19}$")


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


class ReserveResult(StepResultModel):
    """``inventory.reserve``: the warehouse's reservation."""

    reservation_id: ProviderId = Field(description="The warehouse's id for the reservation (rsv_…).")
    sku: str
    quantity: int


class ChargeResult(StepResultModel):
    """``payment.charge``: the payment provider's charge."""

    charge_id: ProviderId = Field(description="The provider's id for the charge (ch_…); a refund must name it.")
    amount_cents: int
    client_secret: Annotated[str | None, Secret] = Field(
        default=None, max_length=500, description="Lets the payer's device confirm the charge: never shown or stored."
    )


class ShipResult(StepResultModel):
    """``shipping.ship``: the carrier's shipment."""

    shipment_id: ProviderId = Field(description="The carrier's id for the shipment (shp_…).")


class ReleaseResult(StepResultModel):
    released: bool


class RefundResult(StepResultModel):
    refunded: bool
    amount_cents: int = 0
    refund_id: ProviderId | None = None


class CancelResult(StepResultModel):
    cancelled: bool
