"""The chaos run's trips (bench/_chaos_trip.py): what each one asks for, and the approver that
answers their approval steps the public way while the stack fails around it.

Each trip's part is fixed by its index, so that a short run already has every case:

- every 10th from the 4th goes to ``Atlantis``: both siblings of the parallel group are refused
  at once; every 10th from the 6th to ``Limbo``: both siblings fail at once, more times than
  their quick retries, and the Supervisor's retries see them through; every 10th from the 8th
  to ``Nowhere``: the hotel alone is refused while the flight is still being served (slowly),
  and the flight is undone;
- by ``index % 7``: 2 is rejected, 4 is never answered (the deadline undoes it), the rest are
  approved;
- two in three ask for insurance (the ``When`` of the insure step).

The approver answers a trip once its approval step is Waiting in the mirror: the even ones with
the update ``request_approve`` (what ``sas approve``/``sas reject`` send), the odd ones with the
signal ``approve``, each carrying an ``Approval``. A send that fails or does not come back in
time (a worker killed, Temporal restarting) is tried again at the next look. So is an update
the workflow refuses because its approval step is still Pending: the mirror can be ahead of
Temporal (its Waiting row is written by a local activity of a workflow task that a killed worker
never completed), and an update that comes with the event that starts the wait is validated
before the workflow has taken that event (Temporal hands a workflow its updates first). Any
other refusal (it no longer waits: the deadline passed meanwhile) ends the matter.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from bench import _chaos_check as check

SEND_TIMEOUT_S = 10.0


def trip_input(index: int) -> dict[str, Any]:
    destination = {3: "Atlantis", 5: "Limbo", 7: "Nowhere"}.get(index % 10, f"City-{index % 5}")
    return {
        "traveller": f"chaos-traveller-{index % 11}",
        "destination": destination,
        "nights": 1 + index % 4,
        "insure": index % 3 != 0,
    }


def approval_plan(index: int) -> str:
    """``approve``, ``reject`` or ``silent``."""
    return {2: "reject", 4: "silent"}.get(index % 7, "approve")


class Approver:
    """Answers the trips' approval steps; ``verdicts`` says what each trip was told."""

    def __init__(self, trips: list[str], say: Any) -> None:
        self.plan = {trip: approval_plan(i) for i, trip in enumerate(trips)}
        self.index = {trip: i for i, trip in enumerate(trips)}
        self.say = say
        self.verdicts: dict[str, str] = {}  # trip -> approved / rejected / silent (once seen waiting)
        self.refused: dict[str, str] = {}  # trip -> why the workflow refused the answer
        self.retries: Counter[str] = Counter()
        self.early = 0  # updates refused because the wait had not begun in Temporal yet
        self.ways: Counter[str] = Counter()

    def pending(self, states: dict[str, check.MirrorTask]) -> list[str]:
        waiting = [t for t in self.plan if (s := states.get(t)) is not None and s.steps.get("approval") == "Waiting"]
        for trip in waiting:
            if self.plan[trip] == "silent":
                self.verdicts.setdefault(trip, "silent")
        return [t for t in waiting if self.plan[t] != "silent" and t not in self.verdicts and t not in self.refused]

    async def answer(self, client: Any, states: dict[str, check.MirrorTask]) -> None:
        await asyncio.gather(*(self._one(client, trip) for trip in self.pending(states)))

    async def _one(self, client: Any, trip: str) -> None:
        from sas.client.errors import NotApplicable
        from sas.client.operator import update
        from sas.task_models import Approval

        approved = self.plan[trip] == "approve"
        approval = Approval(step="approval", approved=approved, by="chaos-driver", reason="chaos run")
        by_update = self.index[trip] % 2 == 0
        try:
            if by_update:
                await asyncio.wait_for(update(client, trip, "request_approve", approval), SEND_TIMEOUT_S)
            else:
                await asyncio.wait_for(client.get_workflow_handle(trip).signal("approve", approval), SEND_TIMEOUT_S)
        except NotApplicable as err:  # the workflow's validator said no
            if "approval is Pending" in str(err):
                self.early += 1  # the wait has not begun in Temporal yet: ask again
                return
            self.refused[trip] = str(err)[:120]
            self.say(f"approval of {trip} refused: {self.refused[trip]}")
            return
        except Exception as err:  # noqa: BLE001 - a stack part is down: ask again at the next look
            self.retries[type(err).__name__] += 1
            return
        self.verdicts[trip] = "approved" if approved else "rejected"
        self.ways["update" if by_update else "signal"] += 1


def trip_figures(
    trips: list[str], states: dict[str, check.MirrorTask], approver: Approver, ledger: list[dict[str, Any]]
) -> dict[str, int]:
    """How the trips ended, and how often each kind of stage was met: what shows a run size
    exercises every one."""
    ended = [states[t] for t in trips if t in states]
    index = {t: i for i, t in enumerate(trips)}
    booked = Counter(e["order_id"] for e in ledger if e["action"] in ("book_flight", "book_hotel"))
    limbo = [t for t in trips if trip_input(index[t])["destination"] == "Limbo"]
    verdicts = Counter(approver.verdicts.values())
    processed = [s for s in ended if s.state == "Processed"]
    return {
        "processed": sum(s.state == "Processed" for s in ended),
        "compensated": sum(s.state == "Compensated" for s in ended),
        "parked": sum(s.state == "Error" for s in ended),
        "both_siblings_refused": sum(trip_input(index[t])["destination"] == "Atlantis" for t in trips),
        "both_siblings_failed": len(limbo),
        "both_siblings_failed_then_booked": sum(booked[t] == 2 for t in limbo),
        "hotel_refused": sum(trip_input(index[t])["destination"] == "Nowhere" for t in trips),
        "approved": verdicts["approved"],
        "rejected": verdicts["rejected"],
        "silent": verdicts["silent"],
        "approvals_by_update": approver.ways["update"],
        "approvals_by_signal": approver.ways["signal"],
        "approval_resends": sum(approver.retries.values()),
        "approvals_before_the_wait": approver.early,
        "approvals_refused": len(approver.refused),
        "insured": sum(s.steps.get("insure") == "Processed" for s in processed),
        "insure_skipped": sum(s.steps.get("insure") == "Skipped" for s in processed),
    }
