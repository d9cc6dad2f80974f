"""Webhooks sent without a signing secret are allowed (a local stack has none) but never silent:
the first unsigned delivery of a process logs one clear warning, and only the first."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from sas.activities import outbound
from sas.activities.outbound import WebhookSender
from tests.outbound.receivers import Receiver
from tests.stack import CALLBACK_SECRET, DEV_OUTBOUND


def unsigned_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sas.outbound" and "unsigned" in r.getMessage()]


async def test_unsigned_deliveries_warn_once_per_process(
    receiver: Receiver, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbound, "_warned_unsigned", False)  # a fresh process
    caplog.set_level(logging.WARNING, logger="sas.outbound")
    async with WebhookSender(DEV_OUTBOUND, SecretStr(CALLBACK_SECRET)) as signed:
        assert (await signed.send(receiver.url, "msg-signed", b"{}", 5)).ok
    assert unsigned_warnings(caplog) == []

    async with WebhookSender(DEV_OUTBOUND, None) as unsigned:
        for n in range(3):
            assert (await unsigned.send(receiver.url, f"msg-{n}", b"{}", 5)).ok
    async with WebhookSender(DEV_OUTBOUND, None) as another:  # a second sender in the same worker
        assert (await another.send(receiver.url, "msg-again", b"{}", 5)).ok

    (warning,) = unsigned_warnings(caplog)
    assert warning.levelno == logging.WARNING and "SAS_CALLBACKS__SECRET" in warning.getMessage()
    assert "webhook-signature" not in receiver.received[-1].headers
    assert "webhook-signature" in receiver.received[0].headers
