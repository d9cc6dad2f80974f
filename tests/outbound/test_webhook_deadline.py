"""A webhook delivery (task callbacks, the Supervisor's alert webhook) ends within its timeout
in all, not per read (activities/outbound.py): a receiver that trickles its answer, or even its
headers, cannot hold the callback activity or the Supervisor's delivery for ever."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from sas.activities.outbound import Delivery, WebhookSender
from sas.task_models.outbound import OutboundPolicy
from tests.helpers import wait_until
from tests.outbound.hostile import Hostile, Trickle, TrickleHead, hostile

TIMEOUT_S = 1.0
# Far more than the delivery's timeout on a loaded machine; far less than for ever.
SLACK_S = 10.0
LOOPBACK = OutboundPolicy(allow_http=True, allow_private=True)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Hostile]:
    with hostile({"/trickled-body": Trickle(), "/trickled-head": TrickleHead()}) as service:
        yield service


async def deliver(receiver: Hostile, path: str) -> Delivery:
    async with WebhookSender(LOOPBACK, None) as sender:
        sending = asyncio.ensure_future(sender.send(f"{receiver.url}{path}", "msg-1", b"{}", TIMEOUT_S))
        done, _ = await asyncio.wait([sending], timeout=TIMEOUT_S + SLACK_S)
        assert done, f"the delivery was still waiting {SLACK_S}s past its timeout of {TIMEOUT_S}s"
        delivery = sending.result()

    async def open_now() -> int:
        return receiver.open_to(path)

    await wait_until(open_now, lambda n: n == 0, timeout=SLACK_S, interval=0.05, what=f"{path} closed by sas")
    return delivery


async def test_a_receiver_that_trickles_its_headers_is_a_retryable_failure_at_the_timeout(receiver: Hostile) -> None:
    delivery = await deliver(receiver, "/trickled-head")
    assert not delivery.ok and delivery.retryable and delivery.status is None
    assert delivery.problem == f"no answer within {TIMEOUT_S:g} s"


async def test_a_receiver_that_trickles_its_body_is_judged_by_its_status(receiver: Hostile) -> None:
    """The status is all a delivery uses: the 200 came, so it was delivered; the body is dropped."""
    delivery = await deliver(receiver, "/trickled-body")
    assert delivery.ok and delivery.status == 200
