"""What a step's Agent returns: one pydantic model per forward action and per undo.

A result carries what the remote service said about the effect, above all the service's own
id for it (``ch_…`` for a charge): later steps receive the results of earlier ones, and a
step's undo receives its own forward result, so a refund names the charge it refunds, as a
real provider requires.

A field marked ``Secret`` (``token: Annotated[str, Secret]``) reaches the later steps and the
undo (it is in the workflow's history, encrypted there when ``SAS_ENCRYPTION__KEYS`` is set)
but is *left out* of everything else: the state store's ``result`` column, the ``status``
query, ``sas show`` and the callbacks. Leaving it out, rather than storing it encrypted, keeps
one rule for every reader. So a field an undo needs in a clean-up (which works from the state
store only) must not be secret; the Agents look an unknown id up by our key instead.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


class SecretMarker:
    """Marks a result field as secret (see the module docstring); use the ``Secret`` instance."""

    def __repr__(self) -> str:
        return "Secret"


Secret: Final = SecretMarker()

# Provider ids are bounded and printable: they are stored, shown and sent back to the service.
ProviderId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")]


class StepResultModel(BaseModel):
    """Base of every result model: extra fields the service sends are ignored, not stored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


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


def secret_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names of ``model``'s fields marked ``Secret``."""
    return frozenset(name for name, info in model.model_fields.items() if any(m is Secret for m in info.metadata))


def shown(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a result of ``model``) without its secret fields: what may be stored and shown."""
    hidden = secret_fields(model)
    return {k: v for k, v in data.items() if k not in hidden}
