"""What the chaos run's fan-outs and parents (bench/_chaos_shapes.py) ask for, and how they ended.

Each one's part is fixed by its index, so that a short run already has every case:

- a fan-out pays 8 recipients, ``index % 4`` of them refused for good (0 to 3: within its
  tolerance of 2, at it, past it: then every payment is refunded); one is served slowly and one
  late (past its caller's complete-by); every 5th from the 5th files in ``Nowhere``, refused
  after the fan-out completed, which undoes it;
- a parent's child delivers to ``Atlantis`` every 5th from the 3rd (refused: the child undoes
  itself and the parent's step fails for good), to ``Faraway`` every 5th from the 2nd (slowly);
  every 5th from the 5th files in ``Nowhere`` after its child completed: the parent undoes it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench import _chaos_check as check
from bench import _chaos_shape_check as shapes

ITEMS = 8


def fan_out_input(index: int) -> dict[str, Any]:
    refused = index % 4
    names = []
    for k in range(ITEMS):
        kind = "refuse" if k < refused else {ITEMS - 3: "slow", ITEMS - 1: "late"}.get(k, "r")
        names.append({"id": f"{kind}-{k}", "cents": 1_000 + 100 * k})
    return {"recipients": names, "cabinet": "Nowhere" if index % 5 == 4 else f"cabinet-{index % 3}"}


def parent_input(index: int) -> dict[str, Any]:
    destination = {2: "Atlantis", 1: "Faraway"}.get(index % 5, f"town-{index % 3}")
    return {
        "parcel": f"parcel-{index}",
        "destination": destination,
        "cabinet": "Nowhere" if index % 5 == 4 else f"cabinet-{index % 3}",
    }


def shape_figures(
    fan_outs: list[str],
    parents: list[str],
    states: dict[str, check.MirrorTask],
    items: list[dict[str, Any]],
    step: str,
) -> dict[str, int]:
    """How the fan-outs and parents ended, and how often each case was met: what shows a run
    size exercises every one."""
    index = {t: i for i, t in enumerate(fan_outs)}
    ended = {t: states[t] for t in fan_outs if t in states}
    processed = [t for t, s in ended.items() if s.state == "Processed"]
    kids = [s for p in parents if (s := states.get(shapes.child_of(p, step))) is not None]
    # Told apart by the parent's plan, not by the child's rows: a child refused at its own
    # delivery has that step undone too (its lookup found nothing), as one its parent undid.
    undone = [
        (kid, parent_input(i))
        for i, p in enumerate(parents)
        if (kid := states.get(shapes.child_of(p, step))) is not None and kid.state == "Compensated"
    ]
    nowhere = [t for t, s in ended.items() if fan_out_input(index[t])["cabinet"] == "Nowhere"]
    parent_states = Counter(states[p].state for p in parents if p in states)
    return {
        "fan_outs_processed": len(processed),
        "fan_outs_compensated": sum(s.state == "Compensated" for s in ended.values()),
        "fan_outs_parked": sum(s.state == "Error" for s in ended.values()),
        "processed_with_items_failed": sum(len(shapes.standing(t, items)) < ITEMS for t in processed),
        "past_tolerance_planned": sum(index[t] % 4 == 3 for t in fan_outs),
        "undone_once_done": sum(ended[t].steps.get(shapes.FAN_OUT_STEP) == "Compensated" for t in nowhere),
        "payments": sum(e["action"] == shapes.ITEM_FORWARD for e in items),
        "refunds": sum(e["action"] == shapes.ITEM_UNDO for e in items),
        "parents_processed": parent_states["Processed"],
        "parents_compensated": parent_states["Compensated"],
        "parents_parked": parent_states["Error"],
        "children_processed": sum(s.state == "Processed" for s in kids),
        "children_undid_themselves": sum(plan["destination"] == "Atlantis" for _, plan in undone),
        "children_undone_by_parent": sum(
            plan["destination"] != "Atlantis" and plan["cabinet"] == "Nowhere" for _, plan in undone
        ),
    }
