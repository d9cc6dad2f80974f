"""The services of the chaos run's fan-out and child task (bench/_chaos_shapes.py): wages, a
filing cabinet, a desk and a courier in one process, by the same contract and over the same kind
of ledger file as the trip's (bench/_chaos_trip_services.py, whose routes they reuse), so the
chaos run counts their effects the same way.

    python -m bench._chaos_shape_services --port P --ledger FILE [--fault-seed N --transient 0.2 ...]

Refusals for good, from the data: a recipient whose id starts with ``refuse`` (``refused``), the
cabinet ``Nowhere`` (``no_cabinet``), a parcel to ``Atlantis`` (``no_route``). Served slowly,
holding the key's lock: a ``slow`` recipient and a parcel to ``Faraway`` (``SLOW_S``, inside the
caller's complete-by), a ``late`` recipient (``LATE_S``, past it: the effect lands after its
caller gave up, and the retry, waiting on the lock, gets its answer). Faults as the trip's
(``--transient``, ``--hang``, ``--decline``: declines fall on the payments).
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.responses import JSONResponse

from bench._chaos_trip_services import Spec, main, refusal

SERVICES = {
    "chaos_wages": Spec("pay", "refund", "pay", "refund", "payment_id", "pay"),
    "chaos_filing": Spec("file", "unfile", "file", "unfile", "filing_id", "fil"),
    "chaos_desk": Spec("open", "close", "open", "close", "case_id", "case"),
    "chaos_courier": Spec("deliver", "recall", "deliver", "recall", "delivery_id", "dlv"),
}
DECLINING = "chaos_wages"
SLOW_S = 2.0  # under the demo's complete-by (3 s)
LATE_S = 4.0  # past it


class ShapeRules:
    """What these services decide from the data (the routes are the trip's: ``create_app``)."""

    owner = "task"

    def before(self, service: str, key: str, body: dict[str, Any]) -> JSONResponse | None:
        return None

    def slow_s(self, service: str, body: dict[str, Any]) -> float:
        to = str(body.get("to", ""))
        if service == "chaos_wages":
            return SLOW_S if to.startswith("slow") else LATE_S if to.startswith("late") else 0.0
        return SLOW_S if service == "chaos_courier" and body.get("destination") == "Faraway" else 0.0

    def refused(self, service: str, body: dict[str, Any]) -> JSONResponse | None:
        if service == "chaos_wages" and str(body.get("to", "")).startswith("refuse"):
            return refusal(422, "refused", f"{body['to']} cannot be paid")
        if service == "chaos_filing" and body.get("cabinet") == "Nowhere":
            return refusal(422, "no_cabinet", "there is no cabinet Nowhere")
        if service == "chaos_courier" and body.get("destination") == "Atlantis":
            return refusal(422, "no_route", "no courier goes to Atlantis")
        return None

    def answer(self, service: str, spec: Spec, body: dict[str, Any]) -> dict[str, Any]:
        return {spec.id_field: f"{spec.prefix}_{uuid.uuid4().hex[:16]}"}


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SERVICES, ShapeRules(), DECLINING)
