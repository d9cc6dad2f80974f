"""What a redrive may keep (``workflows/core/redrive.py``), on the examples' own types: a step
before a fan-out, a child step or a result with secret fields cannot be kept, so a redrive
from after it is refused, naming the step; from it, or before it, the redrive may go."""

from __future__ import annotations

import pytest

from sas.workflows.core.redrive import redrive_refused
from sas_orders.workflows import ORDER
from sas_payout.workflows import PAYOUT
from sas_trip.ticketed import TICKETED_TRIP


@pytest.mark.parametrize(
    ("definition", "from_step", "refused"),
    [
        (TICKETED_TRIP, "tickets", None),
        (TICKETED_TRIP, "charge", None),
        (TICKETED_TRIP, "hotel", None),  # the flight, in its stage, runs again with it
        (TICKETED_TRIP, "seat", "ticketed_trip has no step 'seat'"),
        # The order's charge answers a client secret, which the state store never keeps.
        (ORDER, "ship", "step charge's result has secret fields"),
        (ORDER, "charge", None),
        (PAYOUT, "notice", "step pay is a fan-out, whose items cannot be kept"),
        (PAYOUT, "pay", None),
    ],
)
def test_what_a_redrive_may_keep(definition, from_step, refused) -> None:  # type: ignore[no-untyped-def]
    why = redrive_refused(definition, from_step)
    assert (why is None) == (refused is None), why
    if refused is not None:
        assert why is not None and refused in why


def test_a_stage_s_steps_are_kept_together() -> None:
    assert [s.name for s in TICKETED_TRIP.stages_before("tickets")] == ["flight", "hotel", "charge"]
    assert [s.name for s in TICKETED_TRIP.stages_before("hotel")] == []
