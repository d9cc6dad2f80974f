"""End to end: orders run through an encrypting client and worker, then the raw history is
read with a client that has no key, and no order data may appear in it."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import Message
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sas.payload_codec import ENCODING
from sas.runtime.connect import connect
from sas.settings import CodecServerSettings, EncryptionSettings, TemporalSettings
from sas.task_models import TaskResult
from sas_demo_services.launcher import ServiceProcess
from tests.conftest import temporal_binary
from tests.encryption.conftest import codec_for, codec_server
from tests.helpers import fresh_id
from tests.stack import order, start_stack

# Distinctive enough that a hit can only be a leak.
CUSTOMER = "cust-CANARY-5e1f0a"
ADDRESS = "77 Plaintext Canary Lane"
SKU = "SKU-CANARY-31"
CARD = "4000123412341234"


def payloads_in(message: Message, path: str = "") -> Iterator[tuple[str, Payload]]:
    """Every Payload anywhere in a proto message, with where it was found."""
    if isinstance(message, Payload):
        yield path, message
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        where = f"{path}.{field.name}" if path else field.name
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for key, item in value.items():
                    yield from payloads_in(item, f"{where}[{key}]")
            continue
        for item in value if field.is_repeated else [value]:
            yield from payloads_in(item, where)


def _sdk_bookkeeping(where: str) -> bool:
    """Payloads Temporal itself writes in clear, holding no order data (docs/security.md):
    search attributes, a local activity marker's own record (sequence number, activity
    type, times) - its result sits next to it under details[result], encrypted - and a
    patch marker's record (the patch id), should a change need one."""
    return "search_attributes" in where or where in (
        "marker_recorded_event_attributes.details[data].payloads",
        "marker_recorded_event_attributes.details[patch-data].payloads",
    )


async def raw_history_bytes(raw: Client, workflow_id: str) -> tuple[bytes, list[tuple[str, Payload]]]:
    history = await raw.get_workflow_handle(workflow_id).fetch_history()
    found = [hit for event in history.events for hit in payloads_in(event)]
    return b"".join(e.SerializeToString() for e in history.events), found


def assert_no_plaintext(blob: bytes, payloads: list[tuple[str, Payload]], *secrets: str) -> None:
    for secret in secrets:
        assert secret.encode() not in blob, f"{secret!r} is readable in the raw history"
    ours = [(where, p) for where, p in payloads if not _sdk_bookkeeping(where)]
    assert ours, "no payloads found: the scan is not looking where it should"
    clear = [(where, p.data[:200]) for where, p in ours if p.metadata.get("encoding") != ENCODING]
    assert not clear, f"unencrypted payloads: {clear}"


async def temporal_cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [temporal_binary(), *args, "--address", address]
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)


def first_input(shown: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The workflow input payload in `temporal workflow show --output json`."""
    assert shown.returncode == 0, shown.stderr
    started = json.loads(shown.stdout)["events"][0]["workflowExecutionStartedEventAttributes"]
    [payload] = started["input"]["payloads"]
    return payload


@pytest.fixture
async def encrypting_client(temporal_address: str, encryption: EncryptionSettings) -> Client:
    return await connect(TemporalSettings(address=temporal_address), "test", encryption)


async def test_a_processed_order_leaves_no_plaintext_in_history(
    encrypting_client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    raw = await Client.connect(temporal_address)  # the default converter: no codec, no keys
    async with start_stack(encrypting_client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        task_id = fresh_id("enc")
        handle = await stack.submit(task_id, order(customer_id=CUSTOMER, address=ADDRESS, sku=SKU, card=CARD))
        result = await handle.result()
        assert isinstance(result, TaskResult) and result.state == "Processed"
        # The keyed client reads everything back; the keyless one sees only ciphertext.
        status = await encrypting_client.get_workflow_handle(task_id).query("status")
        assert status["state"] == "Processed"

    blob, payloads = await raw_history_bytes(raw, task_id)
    assert_no_plaintext(blob, payloads, CUSTOMER, ADDRESS, SKU, CARD)
    kinds = {where.split(".")[0] for where, _ in payloads}
    # Input, result, activity inputs and results, and local-activity markers were all checked.
    assert {
        "workflow_execution_started_event_attributes",
        "workflow_execution_completed_event_attributes",
        "activity_task_scheduled_event_attributes",
        "activity_task_completed_event_attributes",
        "marker_recorded_event_attributes",
    } <= kinds, kinds


async def test_temporal_cli_reads_the_history_through_the_codec_server(
    encrypting_client: Client,
    encryption: EncryptionSettings,
    temporal_address: str,
    services: ServiceProcess,
    sqlite_url: str,
) -> None:
    async with start_stack(encrypting_client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        task_id = fresh_id("enc-cli")
        await (await stack.submit(task_id, order(customer_id=CUSTOMER, address=ADDRESS))).result()

    show = ["workflow", "show", "--workflow-id", task_id, "--output", "json"]
    without = await temporal_cli(temporal_address, *show)
    assert first_input(without)["metadata"]["encoding"] == base64.b64encode(ENCODING).decode()
    # What the UI does too: send the encrypted payloads to the codec server to decode.
    # With a token, as the stack runs it: the CLI sends it with --codec-auth.
    token = f"cli-{fresh_id('token')}"
    async with codec_server(codec_for(encryption), access=CodecServerSettings(token=SecretStr(token))) as url:
        shown = await temporal_cli(temporal_address, *show, "--codec-endpoint", url, "--codec-auth", f"Bearer {token}")
    given = first_input(shown)
    assert base64.b64decode(given["metadata"]["encoding"]) == b"json/plain"
    assert json.loads(base64.b64decode(given["data"]))["address"] == ADDRESS


async def test_a_rejected_order_keeps_its_validation_message_encrypted(
    encrypting_client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    # Validation messages name what they reject: without encoded failure attributes the
    # submitter's text would be readable in the failure.
    raw = await Client.connect(temporal_address)
    bad: dict[str, Any] = {
        "customer_id": CUSTOMER,
        "sku": "S",
        "quantity": -1,
        "amount_cents": 5,
        "address": ADDRESS,
        # Messages name the wrong fields, and a field's name is the submitter's text too.
        ADDRESS: "an unknown field",
    }
    async with start_stack(encrypting_client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        task_id = fresh_id("enc-bad")
        handle = await stack.submit(task_id, bad)
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput"
    assert "quantity" in cause.message and ADDRESS in cause.message  # decrypted for the keyed client

    blob, payloads = await raw_history_bytes(raw, task_id)
    assert_no_plaintext(blob, payloads, CUSTOMER, ADDRESS)
    assert b"Encoded failure" in blob
