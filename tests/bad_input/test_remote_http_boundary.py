"""The remote services' HTTP boundary under generated requests: never a 5xx, and every
refusal is a JSON object with "error" and "message" (tests/demo_services has the
hand-picked cases; this throws whatever hypothesis makes at every endpoint)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
from hypothesis import strategies as st

from sas_demo_services import ServiceProcess
from sas_demo_services.schemas import ENDPOINTS
from tests.bad_input.strategies import draw_examples

VALID: dict[str, dict[str, Any]] = {
    "/inventory/reserve": {"sku": "SKU-1", "quantity": 2},
    "/inventory/release": {"reserve_key": "k"},
    "/payment/charge": {"amount_cents": 1999, "currency": "EUR", "card": "4242424242424242"},
    "/payment/refund": {"charge_key": "k"},
    "/shipping/ship": {"address": "1 Main St"},
    "/shipping/cancel": {"ship_key": "k"},
}
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
_HEADER_BYTES = st.binary(max_size=40).map(lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F))


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    path = draw(st.sampled_from([e.path for e in ENDPOINTS]))
    order_id = f"fuzz-{uuid.uuid4().hex[:12]}"
    kind = draw(st.sampled_from(["one field wrong", "extra junk", "any json", "bytes", "deep", "huge"]))
    if kind == "one field wrong":
        body = {"order_id": order_id, **VALID[path]}
        body[draw(st.sampled_from(sorted(body)))] = draw(JSON_VALUES)
        content = json.dumps(body).encode()
    elif kind == "extra junk":
        content = json.dumps(
            {"order_id": order_id, **VALID[path], **draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3))}
        ).encode()
    elif kind == "any json":
        content = json.dumps(draw(JSON_VALUES)).encode()
    elif kind == "bytes":
        content = draw(st.binary(max_size=200))
    elif kind == "deep":
        depth = draw(st.integers(100, 20_000))
        content = b"[" * depth + b"]" * depth
    else:
        content = json.dumps({"order_id": order_id, **dict.fromkeys(VALID[path], "x" * 2000000)}).encode()
    key = draw(
        st.one_of(
            st.none(), st.just(b""), st.just(b"k" * 201), _HEADER_BYTES, st.just(f"key-{uuid.uuid4().hex}".encode())
        )
    )
    content_type = draw(
        st.sampled_from(
            [
                None,
                b"application/json",
                b"application/json; charset=utf-8",
                b"text/plain",
                b"application/vnd.sas+json",
                b"multipart/form-data",
                b"\xe9/json",
            ]
        )
    )
    headers = {}
    if key is not None:
        headers[b"Idempotency-Key"] = key
    if content_type is not None:
        headers[b"Content-Type"] = content_type
    return {"path": path, "content": content, "headers": headers}


async def test_generated_requests_never_get_a_5xx_and_always_a_json_error(services: ServiceProcess) -> None:
    cases = draw_examples(requests(), 80)
    async with httpx.AsyncClient(base_url=services.url, timeout=30.0) as http:
        gate = asyncio.Semaphore(8)

        async def send(case: dict[str, Any]) -> httpx.Response:
            async with gate:
                return await http.post(case["path"], content=case["content"], headers=case["headers"])

        responses = await asyncio.gather(*(send(case) for case in cases))
    for case, response in zip(cases, responses, strict=False):
        shown = (case["path"], case["headers"], case["content"][:200])
        assert response.status_code < 500, (shown, response.status_code, response.text[:300])
        if response.status_code >= 400:
            assert response.headers["content-type"].startswith("application/json"), shown
            error = response.json()
            assert isinstance(error, dict) and isinstance(error.get("error"), str) and error["error"], (shown, error)
            assert isinstance(error.get("message"), str) and error["message"], (shown, error)
    # A healthy mix: most refused, and the service still answers normally afterwards.
    assert sum(r.status_code >= 400 for r in responses) > len(responses) // 2
    async with httpx.AsyncClient(base_url=services.url) as http:
        assert (await http.get("/healthz")).json() == {"ok": True}
