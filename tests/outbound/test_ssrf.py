"""No SSRF: every form of an internal address is refused when a task is
submitted and again when a callback or alert is sent, against real receivers on loopback.

The receivers are real: loopback is exactly what the strict policy must refuse, and the local
development setting (``allow_private``) is what lets the same URLs through, which shows that a
refusal comes from the policy and not from a broken URL."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sas.activities.outbound import WebhookSender, pinned_client
from sas.cli.output import CliError
from sas.cli.task_input import build_input
from sas.settings import SupervisorSettings
from sas.state_store.alerts import list_alerts
from sas.task_models import TaskState
from sas.task_models.outbound import OutboundPolicy, OutboundRefused, check_url
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.outbound.receivers import Receiver
from tests.stack import DEV_OUTBOUND, Stack, order, start_stack

STRICT = OutboundPolicy()  # the default: https only, public addresses only
HTTP_BUT_PUBLIC = OutboundPolicy(allow_http=True)  # plain http to the test receivers, still no loopback

# Loopback, in every notation the C resolver reads as 127.0.0.1 or ::1 (and IPv6 wrappings of it).
LOOPBACK_FORMS = [
    "127.0.0.1",
    "0x7f000001",
    "2130706433",
    "017700000001",
    "127.1",
    "0x7f.0.0.1",
    "127.0.0.1.",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "localhost",
]
# Internal addresses no test receiver listens on; refused before any connection is tried.
OTHER_INTERNAL = {
    "169.254.169.254": "link-local",  # the cloud metadata service
    "[fe80::1]": "link-local",
    "10.0.0.1": "private",
    "172.16.5.4": "private",
    "192.168.1.1": "private",
    "[fd00::1]": "private",
    "100.64.0.1": "not a public address",
    "224.0.0.1": "multicast",
    "[ff02::1]": "multicast",
    "0.0.0.0": "unspecified",
    "0": "unspecified",
    "[::]": "unspecified",
    "240.0.0.1": "reserved",
    "[2002:7f00:1::]": "loopback",  # 6to4 wrapping 127.0.0.1
    "[64:ff9b::7f00:1]": "loopback",  # NAT64 wrapping 127.0.0.1
    "api.localhost": "loopback",  # RFC 6761: loopback whatever DNS says
}


def loopback_name() -> str:
    """A name that only the system resolver (not our own rules) maps to loopback."""
    for name in (socket.gethostname(), "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        if infos and all(str(info[4][0]).startswith(("127.", "::1")) for info in infos):
            return name
    pytest.skip("no name on this machine resolves to loopback through the system resolver")


def form_url(form: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://{form}:{port}/hook"


# --- at submit ------------------------------------------------------------------


def submit_input(url: str, tmp_path: Path, policy: OutboundPolicy = STRICT) -> dict[str, Any]:
    """What ``sas submit order.json`` does with the file, up to starting the workflow."""
    file = tmp_path / "order.json"
    file.write_text(json.dumps({**order().model_dump(exclude_none=True), "callback_url": url}))
    return build_input("order", file, outbound=policy)


@pytest.mark.parametrize("form", LOOPBACK_FORMS)
def test_loopback_in_any_notation_is_refused_at_submit(form: str, tmp_path: Path) -> None:
    with pytest.raises(CliError) as refused:
        submit_input(form_url(form, 8081, "https"), tmp_path)
    assert "'callback_url' in " in refused.value.message and "loopback" in refused.value.message
    # The same URL under the local development setting is accepted: the policy decided.
    assert submit_input(form_url(form, 8081), tmp_path, DEV_OUTBOUND)["callback_url"] == form_url(form, 8081)


@pytest.mark.parametrize("form", sorted(OTHER_INTERNAL))
def test_internal_addresses_are_refused_at_submit(form: str, tmp_path: Path) -> None:
    with pytest.raises(CliError) as refused:
        submit_input(form_url(form, 443, "https"), tmp_path)
    assert OTHER_INTERNAL[form] in refused.value.message


def test_a_name_the_resolver_maps_to_loopback_is_refused_at_submit(tmp_path: Path) -> None:
    name = loopback_name()
    with pytest.raises(CliError) as refused:
        submit_input(form_url(name, 443, "https"), tmp_path)
    assert f"{name} (127." in refused.value.message or f"{name} (::1)" in refused.value.message


@pytest.mark.parametrize(
    ("url", "policy", "why"),
    [
        ("http://93.184.216.34/hook", STRICT, "only https:// is allowed"),
        ("https://93.184.216.34/hook", OutboundPolicy(allowed_hosts=["hooks.example.com"]), "ALLOWED_HOSTS"),
        ("https://user:pw@93.184.216.34/hook", STRICT, "user name or password"),
        ("https://93.184.216.34\\@127.0.0.1/", STRICT, "RFC 3986"),
        ("gopher://93.184.216.34/", STRICT, "http(s) URL"),
    ],
)
def test_scheme_allow_list_and_url_tricks_are_refused_at_submit(
    url: str, policy: OutboundPolicy, why: str, tmp_path: Path
) -> None:
    with pytest.raises(CliError) as refused:
        submit_input(url, tmp_path, policy)
    assert why in refused.value.message


def test_allowed_hosts_let_a_listed_host_through() -> None:
    policy = OutboundPolicy(allowed_hosts=["*.example.com", "93.184.216.34"])
    assert check_url("https://hooks.example.com/x", policy).host == "hooks.example.com"
    assert check_url("https://93.184.216.34/x", policy).port == 443
    with pytest.raises(OutboundRefused, match="ALLOWED_HOSTS"):
        check_url("https://example.org/x", policy)


async def test_sas_submit_prints_the_refusal_on_one_line_and_starts_nothing(stack: Stack, tmp_path: Path) -> None:
    task_id = fresh_id("ssrf-cli")
    file = tmp_path / "order.json"
    file.write_text(json.dumps({"callback_url": "https://0x7f000001:8081/admin/reset"}))
    done = await sas(stack, "submit", str(file), *ORDER_FLAGS, "--id", task_id)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = next(line for line in done.stderr.splitlines() if "callback_url" in line)
    assert line.strip() == (
        f"'callback_url' in {file}: 0x7f000001 (127.0.0.1) is loopback; sas sends only to public addresses"
    ), done.stderr
    assert await stack.record(task_id) is None


# --- at send --------------------------------------------------------------------


@pytest.mark.parametrize("form", LOOPBACK_FORMS)
async def test_loopback_in_any_notation_is_refused_at_send(form: str, receiver: Receiver) -> None:
    url = form_url(form, receiver.port)
    async with WebhookSender(HTTP_BUT_PUBLIC, None) as strict:
        refused = await strict.send(url, "msg-1", b"{}", timeout_s=5)
    assert not refused.ok and not refused.retryable and "loopback" in refused.problem
    assert receiver.received == []
    if "::" in form and not receiver.ipv6:
        return  # the receiver is on 127.0.0.1 only; the refusal above is what this case shows
    async with WebhookSender(DEV_OUTBOUND, None) as dev:
        assert (await dev.send(url, "msg-2", b"{}", timeout_s=5)).ok
    assert [r.headers["webhook-id"] for r in receiver.received] == ["msg-2"]


@pytest.mark.parametrize("form", sorted(OTHER_INTERNAL))
async def test_internal_addresses_are_refused_at_send(form: str) -> None:
    async with WebhookSender(HTTP_BUT_PUBLIC, None) as strict:
        refused = await strict.send(form_url(form, 80), "msg-1", b"{}", timeout_s=5)
    assert not refused.ok and not refused.retryable and OTHER_INTERNAL[form] in refused.problem


async def test_a_name_the_resolver_maps_to_loopback_is_refused_at_send(receiver: Receiver) -> None:
    name = loopback_name()
    url = form_url(name, receiver.port)
    # Accepted when the URL alone is judged (no lookup): only the send-time lookup can catch it.
    check_url(url, HTTP_BUT_PUBLIC)
    async with WebhookSender(HTTP_BUT_PUBLIC, None) as strict:
        refused = await strict.send(url, "msg-1", b"{}", timeout_s=5)
    assert not refused.ok and "loopback" in refused.problem and receiver.received == []
    async with WebhookSender(DEV_OUTBOUND, None) as dev:
        assert (await dev.send(url, "msg-2", b"{}", timeout_s=5)).ok
    # Connected to the checked address, yet the request still names the host it was meant for.
    assert receiver.received[0].headers["host"] == f"{name}:{receiver.port}"


async def test_the_pinned_client_refuses_too_when_used_directly(receiver: Receiver) -> None:
    # Not only WebhookSender: any request through the pinned client is checked as it connects.
    async with pinned_client(HTTP_BUT_PUBLIC) as http:
        with pytest.raises(OutboundRefused, match="loopback"):
            await http.get(f"http://0x7f000001:{receiver.port}/hook")
    assert receiver.received == []


async def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    receiver.redirect_to = "http://169.254.169.254/latest/meta-data/"
    async with WebhookSender(DEV_OUTBOUND, None) as dev:
        delivery = await dev.send(receiver.url, "msg-1", b"{}", timeout_s=5)
    assert not delivery.ok and not delivery.retryable and delivery.status == 307
    assert "redirects are not followed" in delivery.problem
    assert len(receiver.received) == 1


async def test_an_allow_list_change_refuses_at_send_what_was_accepted(receiver: Receiver) -> None:
    async with WebhookSender(DEV_OUTBOUND.model_copy(update={"allowed_hosts": ["hooks.example.com"]}), None) as s:
        refused = await s.send(receiver.url, "msg-1", b"{}", timeout_s=5)
    assert not refused.ok and "ALLOWED_HOSTS" in refused.problem and receiver.received == []


async def test_a_callback_to_a_name_that_resolves_to_loopback_is_accepted_but_refused_when_sent(
    client, temporal_address: str, services, sqlite_url: str, receiver: Receiver
) -> None:  # type: ignore[no-untyped-def]
    # Accepted: the task's checks judge the URL without asking DNS (the Temporal CLI path, and
    # a name that resolves publicly today). The worker resolves it when it sends: loopback.
    url = form_url(loopback_name(), receiver.port)
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, outbound=HTTP_BUT_PUBLIC
    ) as stack:
        task_id = fresh_id("ssrf-send")
        handle = await stack.submit(task_id, order(callback_url=url))
        assert (await handle.result()).state == TaskState.PROCESSED  # a refused callback never fails the task
        status = await handle.query("status")
    assert receiver.received == []
    refusals = [e for e in status["events"] if "callback not delivered" in e]
    assert refusals and all("is loopback" in e for e in refusals), status["events"]


async def test_a_task_started_without_sas_submit_is_refused_at_accept(
    client, temporal_address: str, services, sqlite_url: str, receiver: Receiver
) -> None:  # type: ignore[no-untyped-def]
    # As `temporal workflow start --input '{..., "callback_url": ...}'` does: a plain JSON input.
    payload = {**order().model_dump(exclude_none=True), "callback_url": f"http://0x7f000001:{receiver.port}/hook"}
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, outbound=HTTP_BUT_PUBLIC
    ) as stack:
        task_id = fresh_id("ssrf-cli")
        handle = await stack.client.start_workflow(
            "OrderWorkflow", payload, id=task_id, task_queue=stack.settings.temporal.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        cause = failed.value.cause
        while cause.__cause__ is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput"
        assert "callback_url: 0x7f000001 (127.0.0.1) is loopback" in str(cause)
        assert await stack.record(task_id) is None  # never accepted into the state store
    assert receiver.received == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_an_alert_webhook_accepted_at_start_up_is_refused_when_sent_under_the_strict_setting(
    make_rig, receiver: Receiver
) -> None:  # type: ignore[no-untyped-def]
    rig = await make_rig(outcome="park")
    # Started with the webhook on loopback allowed, then the setting is made strict: the
    # delivery is judged by the rules in force when it is sent.
    webhook = SupervisorSettings().webhook.model_copy(update={"url": receiver.url, "retry_delay_s": 0.2})
    rig.settings = rig.settings.model_copy(
        update={
            "supervisor": rig.settings.supervisor.model_copy(update={"webhook": webhook}),
            "outbound": HTTP_BUT_PUBLIC,
        }
    )
    await rig.start_supervisor("sup-ssrf", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("ssrf-alert")
    await rig.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id)
    handle = await rig.submit(task_id)

    async def alert() -> Any:
        async with rig.sessions() as session:
            return next((a for a in await list_alerts(session, limit=1000) if a.task_id == task_id), None)

    given_up = await wait_until(
        alert, lambda a: a is not None and a.delivery_attempts >= 1, timeout=60, what="the delivery tried"
    )
    # Refused by policy: given up at once (no retry can change that; the store marks a given-up
    # delivery as finished), and nothing reached the receiver.
    assert given_up.delivery_attempts == 1 and given_up.delivered_at is not None
    assert receiver.received == []
    await handle.terminate("test over")


async def test_a_name_that_does_not_resolve_is_retried_not_refused() -> None:
    # DNS may answer next time: a transient failure, unlike a policy refusal.
    async with WebhookSender(HTTP_BUT_PUBLIC, None) as sender:
        delivery = await sender.send("http://no-such-host.invalid/hook", "msg-1", b"{}", timeout_s=5)
    assert not delivery.ok and delivery.retryable and "does not resolve" in delivery.problem
