"""The point of no return read from a task's rows, as the Scheduler reads it from its own state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sas.state_store.pivots import past_point_of_no_return


@dataclass
class Row:
    name: str
    state: str
    pivot: str | None = None
    permanent: bool = False


def trip(charge: str, tickets: str = "Pending", permanent: bool = False) -> list[Row]:
    return [
        Row("flight", "Processed"),
        Row("hotel", "Processed"),
        Row("charge", charge, "pivot", permanent),
        Row("tickets", tickets, "forward_only"),
    ]


@pytest.mark.parametrize(
    ("rows", "past"),
    [
        (trip("Pending"), None),
        (trip("Failed", permanent=True), None),  # refused for good: the charge did nothing
        (trip("Processing"), "the pivot charge has been attempted (Processing)"),
        (trip("Failed"), "the pivot charge has been attempted (Failed)"),  # a 5xx, a timeout: maybe done
        (trip("Processed"), "the pivot charge has been attempted (Processed)"),
        (trip("Processed", "Processing"), "step tickets, after the pivot charge, has run"),
        ([Row("reserve", "Processed"), Row("charge", "Processing")], None),  # a type without a pivot
    ],
)
def test_past_the_point_of_no_return(rows: list[Row], past: str | None) -> None:
    assert past_point_of_no_return(rows) == past  # type: ignore[arg-type]
