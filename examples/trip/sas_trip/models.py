"""The trip's input, and what its services answer: each step's result."""

from __future__ import annotations

from pydantic import Field

from sas.api import ProviderId, StepResultModel, TaskInput


class TripInput(TaskInput):
    """A trip: a flight to ``destination`` on ``date`` and ``nights`` in a hotel there."""

    traveller: str = Field(min_length=1, max_length=100, pattern=r"^[\x20-\x7e]+$")
    origin: str = Field(min_length=3, max_length=3, pattern=r"^[A-Z]{3}$", description="IATA code, e.g. LHR.")
    destination: str = Field(min_length=1, max_length=60)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="Departure day, YYYY-MM-DD.")
    nights: int = Field(ge=1, le=60, strict=True)
    card: str = Field(default="4242424242424242", pattern=r"^[0-9]{12,19}$")
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")


class FlightBooked(StepResultModel):
    """``flights.book``: the airline's booking."""

    booking_id: ProviderId
    fare_cents: int


class HotelBooked(StepResultModel):
    """``hotels.book``: the hotel's booking."""

    booking_id: ProviderId
    total_cents: int


class Cancelled(StepResultModel):
    """A booking's cancellation."""

    cancelled: bool


class Charged(StepResultModel):
    """``cards.charge``: the card processor's charge."""

    charge_id: ProviderId
    amount_cents: int


class Refunded(StepResultModel):
    """``cards.refund``."""

    refunded: bool


class TicketsIssued(StepResultModel):
    """``tickets.issue``: the airline's tickets for the booked flight (the ticketed trip)."""

    ticket_id: ProviderId


class SeatedTripInput(TripInput):
    """A trip with a seat on the flight: ``seat`` is reserved once the flight is booked."""

    seat: str = Field(default="aisle", pattern=r"^[a-z0-9]{1,12}$", description="e.g. aisle, window, 12a.")


class SeatReserved(StepResultModel):
    """``seats.reserve``: the seat held on the booked flight."""

    booking_id: ProviderId
    seat: str
