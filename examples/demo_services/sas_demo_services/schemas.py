"""Request bodies of the business endpoints and the catalogue of those endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Service = Literal["inventory", "payment", "shipping"]
Action = Literal["reserve", "release", "charge", "refund", "ship", "cancel"]

# Most parcels one shipment may have (task_models.orders.OrderInput.parcels has the same bound).
MAX_PARCELS = 50
# Bounded so one request cannot bloat the ledger; generous for real ids.
Text = Annotated[str, StringConstraints(min_length=1, max_length=500)]
# A compensation may name an empty key (its step never got one): nothing to undo, not an error.
TargetKey = Annotated[str, StringConstraints(max_length=200)]
# The services' own ids (rsv_…, ch_…, shp_…): an undo must name the effect it undoes by it, as a
# real provider's refund names the charge.
ProviderId = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class RequestBody(BaseModel):
    """What every business request carries: the order it belongs to."""

    # strict: "5" is not a quantity. Unknown fields are ignored (and left out of the
    # idempotency fingerprint), so clients may send extra context.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    order_id: Text


class ReserveBody(RequestBody):
    """``POST /inventory/reserve``."""

    sku: Text
    quantity: int = Field(gt=0, le=1_000_000)


class ReleaseBody(RequestBody):
    """``POST /inventory/release``."""

    reserve_key: TargetKey
    reservation_id: ProviderId | None = None


class ChargeBody(RequestBody):
    """``POST /payment/charge``."""

    amount_cents: int = Field(gt=0, le=10**12)
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Za-z]{3}$")]
    card: Text


class RefundBody(RequestBody):
    """``POST /payment/refund``."""

    charge_key: TargetKey
    charge_id: ProviderId | None = None


class ShipBody(RequestBody):
    """``POST /shipping/ship``: the shipment, or with ``parcel`` one parcel of it.

    A shipment of several parcels sends each parcel under its own key (the Agent uses
    ``<step key>:parcel-<i>``), then the shipment itself under the step's key; a shipment of
    one parcel is that last call alone."""

    address: Text
    parcel: int | None = Field(default=None, ge=1, le=MAX_PARCELS)


class CancelBody(RequestBody):
    """``POST /shipping/cancel``."""

    ship_key: TargetKey
    shipment_id: ProviderId | None = None


@dataclass(frozen=True)
class Endpoint:
    """One business endpoint.

    Attributes:
        service: The service it belongs to.
        action: What it does.
        model: Its request body.
        undoes: For a compensation, the forward action it undoes; None for a forward action.
        target_field: For a compensation, the body field naming the forward key it undoes.
        id_field: For a forward action, the answer's field with the service's id of the effect;
            for a compensation, the body field that must name it.
        id_prefix: How the service's ids of the forward effect begin.
    """

    service: Service
    action: Action
    model: type[RequestBody]
    undoes: Action | None = None
    target_field: str | None = None
    id_field: str = "id"
    id_prefix: str = "id"

    @property
    def name(self) -> str:
        """``service.action``, as fault rules name it."""
        return f"{self.service}.{self.action}"

    @property
    def path(self) -> str:
        """The URL path."""
        return f"/{self.service}/{self.action}"

    def target_key(self, body: BaseModel) -> str | None:
        """The forward key a compensation body undoes; None for a forward action."""
        return None if self.target_field is None else str(getattr(body, self.target_field))

    def target_id(self, body: BaseModel) -> str | None:
        """The service's id of the effect a compensation body undoes, if it names one."""
        value = getattr(body, self.id_field, None) if self.undoes else None
        return None if value is None else str(value)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("inventory", "reserve", ReserveBody, id_field="reservation_id", id_prefix="rsv"),
    Endpoint(
        "inventory", "release", ReleaseBody, undoes="reserve", target_field="reserve_key", id_field="reservation_id"
    ),
    Endpoint("payment", "charge", ChargeBody, id_field="charge_id", id_prefix="ch"),
    Endpoint("payment", "refund", RefundBody, undoes="charge", target_field="charge_key", id_field="charge_id"),
    Endpoint("shipping", "ship", ShipBody, id_field="shipment_id", id_prefix="shp"),
    Endpoint("shipping", "cancel", CancelBody, undoes="ship", target_field="ship_key", id_field="shipment_id"),
)

ENDPOINT_NAMES: frozenset[str] = frozenset(e.name for e in ENDPOINTS)
SERVICES: frozenset[str] = frozenset(e.service for e in ENDPOINTS)
