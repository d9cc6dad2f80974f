"""Signed deliveries: the receiver shown in docs/webhooks.md, run exactly as
written, verifies real deliveries from sas with the ``standardwebhooks`` package; a replayed,
tampered or unsigned one is refused."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from standardwebhooks import Webhook, WebhookVerificationError
from temporalio.exceptions import ApplicationError

from sas.activities.outbound import SERVICE_RESPONSE_CAP, WebhookSender, signed_headers
from sas.activities.remote import RemoteCaller
from sas.activities.remote_answers import GARBAGE
from sas.task_models import TaskState
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until
from tests.outbound.receivers import Receiver
from tests.stack import CALLBACK_SECRET, DEV_OUTBOUND, Stack, order

ROOT = Path(__file__).resolve().parents[2]
SECRET = SecretStr(CALLBACK_SECRET)


def doc_receiver_source() -> str:
    """The python block of docs/webhooks.md that starts with ``# receiver.py``."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "webhooks.md").read_text(), re.S)
    (source,) = [b for b in blocks if b.startswith("# receiver.py")]
    return source


@dataclass
class DocReceiver:
    url: str
    process: subprocess.Popen[str]
    lines: list[str]


def _answers(url: str) -> bool:
    """Whether the receiver itself answers: an unsigned POST is refused (401) by it and by nothing
    else (a port in use says only that some process holds it)."""
    try:
        return httpx.post(url, content=b"{}", timeout=2).status_code == 401
    except httpx.HTTPError:
        return False


def _start_doc_receiver(script: Path) -> tuple[str, subprocess.Popen[str]] | None:
    """The receiver on a free port, answering; None if it exited first (another process took the
    port between our pick and its bind, as a second suite on the machine may)."""
    port = free_port()
    env = {**os.environ, "SAS_WEBHOOK_SECRET": CALLBACK_SECRET, "PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    url = f"http://127.0.0.1:{port}/hook"
    deadline = time.monotonic() + 60
    while not _answers(url):
        if process.poll() is not None:
            return None
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("the receiver of docs/webhooks.md does not answer")
        time.sleep(0.05)
    return url, process


@pytest.fixture
def doc_receiver(tmp_path: Path) -> Iterator[DocReceiver]:
    script = tmp_path / "receiver.py"
    script.write_text(doc_receiver_source())
    started = None
    for _ in range(5):
        started = _start_doc_receiver(script)
        if started is not None:
            break
    assert started is not None, "the receiver of docs/webhooks.md exited at start, five times"
    url, process = started
    lines: list[str] = []

    def read_lines() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.strip())

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        yield DocReceiver(url, process, lines)
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)


async def post_raw(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with httpx.AsyncClient() as http:
        return (await http.post(url, content=body, headers=headers)).status_code


async def test_the_documented_receiver_verifies_the_events_of_a_real_task(
    stack: Stack, doc_receiver: DocReceiver
) -> None:
    task_id = fresh_id("doc-hook")
    result = await (await stack.submit(task_id, order(callback_url=doc_receiver.url))).result()
    assert result.state == TaskState.PROCESSED
    got = await wait_until(
        lambda: asyncio.sleep(0, [line.split() for line in doc_receiver.lines]),
        lambda lines: len(lines) >= 5,
        what="five events verified by the documented receiver",
    )
    assert [kind for _, kind, _ in got] == [
        "received",
        "step_completed",
        "step_completed",
        "step_completed",
        "completed",
    ]
    assert {tid for _, _, tid in got} == {task_id}


async def test_a_replayed_or_tampered_delivery_is_refused_by_the_documented_receiver(
    receiver: Receiver, doc_receiver: DocReceiver
) -> None:
    # Capture a real delivery (body and headers exactly as sas sent them).
    async with WebhookSender(DEV_OUTBOUND, SECRET) as sender:
        assert (await sender.send(receiver.url, "evt-1", b'{"kind":"completed","task_id":"t-1"}', 5)).ok
    (captured,) = receiver.received
    headers = {k: v for k, v in captured.headers.items() if k.startswith("webhook-") or k == "content-type"}

    assert await post_raw(doc_receiver.url, captured.body, headers) == 204
    # The same delivery again, inside the tolerance: accepted, but handled once (webhook-id).
    assert await post_raw(doc_receiver.url, captured.body, headers) == 204
    # Tampered: another body, or another id, under the captured signature.
    assert await post_raw(doc_receiver.url, captured.body.replace(b"t-1", b"t-2"), headers) == 401
    assert await post_raw(doc_receiver.url, captured.body, {**headers, "webhook-id": "evt-2"}) == 401
    # The same message captured six minutes ago (past the 5-minute tolerance), however well signed.
    stale = signed_headers(SECRET, "evt-1", captured.body, at=datetime.now(UTC) - timedelta(minutes=6))
    assert await post_raw(doc_receiver.url, captured.body, stale) == 401
    # Unsigned, or signed with another secret.
    assert await post_raw(doc_receiver.url, captured.body, {"webhook-id": "evt-1"}) == 401
    other = SecretStr("whsec_" + base64.b64encode(os.urandom(32)).decode())
    assert await post_raw(doc_receiver.url, captured.body, signed_headers(other, "evt-1", captured.body)) == 401
    # Too large: refused unread.
    assert await post_raw(doc_receiver.url, b"x" * (64 * 1024 + 1), headers) == 413
    await wait_until(lambda: asyncio.sleep(0, doc_receiver.lines), lambda lines: len(lines) >= 1, what="output")
    assert doc_receiver.lines == ["evt-1 completed t-1"]


def test_the_verifier_refuses_replays_outside_the_tolerance_and_tampering() -> None:
    body = b'{"id":7}'
    verifier = Webhook(CALLBACK_SECRET)
    assert verifier.verify(body, signed_headers(SECRET, "alert-7-1", body)) == {"id": 7}
    for at, why in ((timedelta(minutes=-6), "too old"), (timedelta(minutes=6), "too new")):
        with pytest.raises(WebhookVerificationError, match=why):
            verifier.verify(body, signed_headers(SECRET, "alert-7-1", body, at=datetime.now(UTC) + at))
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        verifier.verify(b'{"id":8}', signed_headers(SECRET, "alert-7-1", body))


async def test_answers_are_read_with_a_cap(receiver: Receiver) -> None:
    receiver.answer_bytes = SERVICE_RESPONSE_CAP + 1
    # A remote service answering more than the cap fails the Agent's attempt (retryable garbage).
    async with httpx.AsyncClient() as http:
        caller = RemoteCaller(http, f"http://127.0.0.1:{receiver.port}")
        with pytest.raises(ApplicationError) as failed:
            await caller.post("/hook", {"order_id": "o-1"}, "key-1", datetime.now(UTC) + timedelta(seconds=10))
    assert failed.value.type == GARBAGE and f"more than {SERVICE_RESPONSE_CAP} bytes" in str(failed.value)
    # A webhook receiver's long answer is cut off at the cap; its status still counts.
    async with WebhookSender(DEV_OUTBOUND, SECRET) as sender:
        delivery = await sender.send(receiver.url, "evt-big", b"{}", 5)
    assert delivery.ok and delivery.status == 200
