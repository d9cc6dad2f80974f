"""The seals (``sas.task_models.seals``), pure and fast: a seal verifies for exactly the call,
result or checkpoint it was made for, under a key of the ring, and for nothing else. Every part
of what a seal covers is changed one at a time, and each change must break it: a part left out
of the seal is a part a forger may change."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest

from sas.task_models import seals
from sas.task_models.steps import MirrorStamp, StepCall, StepResult

WORKFLOW, RUN, AGENT = "order-1", "run-1", "payment.charge"
KEY, OLD_KEY = b"k" * 32, b"o" * 32


@pytest.fixture(autouse=True)
def ring() -> Iterator[None]:
    """Each test installs its own ring; the process's is put back after it."""
    before = seals._ring
    seals.install([KEY])
    yield
    seals._ring = before


def call(**changes: Any) -> StepCall:
    fields: dict[str, Any] = {
        "task_id": "order-1",
        "task_type": "order",
        "step": "charge",
        "position": 1,
        "idempotency_key": "order-1:charge",
        "target_key": None,
        "compensation": False,
        "payload": {"amount_cents": 100},
        "stamp": MirrorStamp(seq=3),
        "item_key": None,
    }
    return StepCall(**(fields | changes))


def sealed_call(**changes: Any) -> StepCall:
    c = call(**changes)
    return c.model_copy(update={"seal": seals.call_seal(WORKFLOW, RUN, AGENT, c)})


CALL_CHANGES = [
    {"task_id": "order-2"},
    {"step": "ship"},
    {"idempotency_key": "order-1:ship"},
    {"target_key": "order-1:charge"},
    {"compensation": True},
    {"item_key": "item-1"},
    {"stamp": MirrorStamp(seq=4)},
]


def test_a_sealed_call_verifies_for_its_own_run_and_agent_only() -> None:
    c = sealed_call()
    assert seals.call_sealed(WORKFLOW, RUN, AGENT, c)
    assert not seals.call_sealed("order-2", RUN, AGENT, c)
    assert not seals.call_sealed(WORKFLOW, "run-2", AGENT, c)
    assert not seals.call_sealed(WORKFLOW, RUN, "payment.refund", c)


@pytest.mark.parametrize("change", CALL_CHANGES, ids=lambda c: next(iter(c)))
def test_every_part_of_a_call_is_sealed(change: dict[str, Any]) -> None:
    seal = sealed_call().seal
    assert not seals.call_sealed(WORKFLOW, RUN, AGENT, call(**change).model_copy(update={"seal": seal}))
    # and the changed call has a seal of its own, not the original's
    assert sealed_call(**change).seal != seal


def test_a_call_without_a_seal_or_with_another_kind_of_seal_is_not_sealed() -> None:
    assert not seals.call_sealed(WORKFLOW, RUN, AGENT, call())
    assert not seals.call_sealed(WORKFLOW, RUN, AGENT, object())
    forged = call().model_copy(update={"seal": "A" * 22})
    assert not seals.call_sealed(WORKFLOW, RUN, AGENT, forged)


def test_the_first_key_seals_and_every_key_of_the_ring_verifies() -> None:
    seals.install([OLD_KEY])
    by_old = sealed_call()
    seals.install([KEY, OLD_KEY])
    by_new = sealed_call()
    assert by_new.seal != by_old.seal, "the first key of the ring seals"
    assert seals.call_sealed(WORKFLOW, RUN, AGENT, by_old), "a retired key still verifies"
    assert seals.call_sealed(WORKFLOW, RUN, AGENT, by_new)
    seals.install([KEY])
    assert not seals.call_sealed(WORKFLOW, RUN, AGENT, by_old), "a key off the ring verifies nothing"


def test_a_seal_is_the_first_128_bits_of_hmac_sha256_over_canonical_json_of_its_parts() -> None:
    # What a verifier written apart from sas (another language, an audit) computes.
    c = call()
    text = (
        '{"a":"payment.charge","c":false,"i":null,"k":"order-1:charge","n":3,"r":"run-1",'
        '"s":"charge","t":"order-1","u":null,"w":"order-1"}'
    )
    digest = hmac.new(KEY, text.encode(), hashlib.sha256).digest()[:16]
    assert seals.call_seal(WORKFLOW, RUN, AGENT, c) == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_a_ring_needs_a_key_of_at_least_16_bytes() -> None:
    for keys in ([], [b"short"], [KEY, b"x" * 15]):
        with pytest.raises(ValueError, match=r"^a seal key ring needs at least one key of at least 16 bytes$"):
            seals.install(keys)
    seals.install([b"x" * 16])
    assert seals._ring == (b"x" * 16,)
    assert seals.installed()


def test_without_a_ring_a_process_makes_one_key_of_its_own() -> None:
    seals._ring = ()
    assert not seals.installed()
    c = sealed_call()
    assert seals.installed()
    ring: tuple[bytes, ...] = seals._ring  # set by sealing, which mypy does not follow
    assert len(ring) == 1 and len(ring[0]) == 32 and ring[0] != KEY
    assert seals.call_sealed(WORKFLOW, RUN, AGENT, c), "the same key seals and verifies within the process"


def test_a_derived_key_is_the_same_for_one_url_and_differs_between_urls() -> None:
    url = "postgresql+asyncpg://sas@db/sas"
    key = seals.derived_key(url)
    assert key == seals.derived_key(url) and len(key) == 32
    assert key != seals.derived_key(url + "2")
    label = b"sas seal key, derived from the state store URL"
    assert key == hmac.new(url.encode(), label, hashlib.sha256).digest()


def test_a_result_verifies_for_its_call_and_its_data_only() -> None:
    c, data = call(), {"charge_id": "ch-1", "amount_cents": 100}
    result = StepResult(data=data, seal=seals.result_seal(WORKFLOW, RUN, AGENT, c, data))
    assert seals.result_sealed(WORKFLOW, RUN, AGENT, c, result)
    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, c, result.model_copy(update={"data": data | {"x": 1}}))
    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, call(step="ship"), result)
    assert not seals.result_sealed(WORKFLOW, "run-2", AGENT, c, result)
    assert not seals.result_sealed("order-2", RUN, AGENT, c, result)
    assert not seals.result_sealed(WORKFLOW, RUN, "payment.refund", c, result)
    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, c, object())
    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, c, StepResult(data=data))
    # a result's seal is not a call's: the data is part of it
    assert result.seal != seals.call_seal(WORKFLOW, RUN, AGENT, c)


def test_a_result_that_is_not_json_was_sealed_by_nobody() -> None:
    class Claimed:
        def __init__(self, data: dict[str, Any]) -> None:
            self.data, self.seal = data, "A" * 22

    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, call(), Claimed({"amount": float("nan")}))
    assert not seals.result_sealed(WORKFLOW, RUN, AGENT, call(), Claimed({"when": object()}))


def test_a_checkpoint_verifies_for_its_activity_and_progress_only() -> None:
    progress = {"parcels_done": 3}
    seal = seals.checkpoint_seal(WORKFLOW, RUN, "shipping.ship", "7", progress)
    assert seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "7", progress, seal)
    assert not seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "7", {"parcels_done": 4}, seal)
    assert not seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "8", progress, seal)
    assert not seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.cancel", "7", progress, seal)
    assert not seals.checkpoint_sealed(WORKFLOW, "run-2", "shipping.ship", "7", progress, seal)
    assert not seals.checkpoint_sealed("order-2", RUN, "shipping.ship", "7", progress, seal)
    assert not seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "7", progress, None)
    assert not seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "7", {"p": float("inf")}, seal)
    seals.install([OLD_KEY, KEY])
    assert seals.checkpoint_sealed(WORKFLOW, RUN, "shipping.ship", "7", progress, seal), "every key verifies"
    assert seals.checkpoint_seal(WORKFLOW, RUN, "shipping.ship", "7", progress) != seal, "the first key seals"


def known(text: str) -> str:
    digest = hmac.new(KEY, text.encode(), hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_a_results_and_a_checkpoints_seal_are_known_answers() -> None:
    # Seals are made in workflows and checked on replay and by other workers of a deployment:
    # the canonical text of each must not drift between versions. Non-ASCII stays escaped.
    c = call()
    data = {"note": "café"}
    result_text = (
        '{"a":"payment.charge","c":false,"d":{"note":"caf\\u00e9"},"i":null,"k":"order-1:charge","n":3,'
        '"r":"run-1","s":"charge","t":"order-1","u":null,"w":"order-1"}'
    )
    assert seals.result_seal(WORKFLOW, RUN, AGENT, c, data) == known(result_text)
    checkpoint_text = '{"a":"shipping.ship","id":"7","p":{"parcels_done":3},"r":"run-1","w":"order-1"}'
    assert seals.checkpoint_seal(WORKFLOW, RUN, "shipping.ship", "7", {"parcels_done": 3}) == known(checkpoint_text)


def test_what_is_not_standard_json_is_never_sealed() -> None:
    with pytest.raises(ValueError):
        seals.result_seal(WORKFLOW, RUN, AGENT, call(), {"amount": float("nan")})


def test_every_seal_is_22_characters() -> None:
    # Only base64's padding is stripped, never a character of the seal itself.
    assert {len(seals.checkpoint_seal(WORKFLOW, RUN, "a", str(n), {"n": n})) for n in range(400)} == {22}
