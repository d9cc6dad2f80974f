"""Every service that injects faults keeps the HTTP contract under each fault it injects, on a
forward call (docs/http-contract.md, "the services' faults"), judged on its own ledger:

- a forward that took effect is named by the lookup, and a repeat under its key answers alike
  with no second effect;
- one that did not take effect is "nothing" at the lookup, and that answer voids the key: a later
  forward under it is refused ``409 voided`` and does nothing;
- a lookup sent while the forward is held at the service, under the fault, waits for it: its
  answer agrees with what the forward then did;
- a repeat under a key already done answers as before (or a transient answer), whatever fault
  hits it: never a refusal, never a second effect.

Each kind leaves what its table says (``fault_drivers``): latency and lost_response an effect,
every other an answer with nothing done. The demo services run in their own process, the trip's
and the payout's services too (``trip_services``, ``payout_services``), all on loopback.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio

from sas_demo_services import RemoteServicesAdmin, ServiceProcess, free_port, start_service_process
from tests.demo_services.fault_drivers import (
    DEMO_KINDS,
    EXAMPLE_KINDS,
    Bank,
    Driver,
    Flights,
    Inventory,
    Payment,
    Shipping,
)
from tests.helpers import wait_until

DEMO = {"inventory": Inventory, "payment": Payment, "shipping": Shipping}
EXAMPLES = {"flights": Flights, "payout_bank": Bank}
CASES = [(service, kind) for service in DEMO for kind in DEMO_KINDS] + [
    (service, kind) for service in EXAMPLES for kind in EXAMPLE_KINDS
]
# Statuses sas reads as transient (docs/http-contract.md): a repeat may meet one, and asks again.
TRANSIENT = {408, 425, 429}
HOLD_S = 60.0  # lifted by the test (demo services) once the lookup is seen waiting
EXAMPLE_HOLD_S = 1.5  # the examples' holds run out by themselves


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("fault_promises")
    with start_service_process(
        free_port(), str(folder / "ledger.db"), enable_faults=True, log_path=str(folder / "services.log")
    ) as process:
        yield process


@pytest.fixture
def where(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The service's base URL and admin token (the example services' fixtures start their
    processes outside any event loop, so they are asked for here, not in an async fixture)."""
    service = request.node.callspec.params["service"]
    if service in DEMO:
        process: ServiceProcess = request.getfixturevalue("demo")
        return process.url, process.admin_token
    return request.getfixturevalue("trip_services" if service == "flights" else "payout_services"), None


@pytest_asyncio.fixture
async def driver(request: pytest.FixtureRequest, where: tuple[str, str | None]) -> AsyncIterator[Driver]:
    service = request.node.callspec.params["service"]
    url, token = where
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as http:
        if service not in DEMO:
            yield EXAMPLES[service](http)
            return
        async with RemoteServicesAdmin(url, admin_token=token) as admin:
            yield DEMO[service](http, admin)


def new_task() -> tuple[str, str]:
    task = f"fault-{uuid.uuid4().hex[:16]}"
    return task, f"{task}:step"


def transient(answer: httpx.Response) -> bool:
    """An answer sas asks again after: 5xx, 408, 425, 429, or a 2xx it cannot read (garbage)."""
    if answer.status_code >= 500 or answer.status_code in TRANSIENT:
        return True
    return answer.is_success and "application/json" not in answer.headers.get("content-type", "")


async def assert_kept(d: Driver, task: str, key: str, left: str, looked_up: str | None) -> None:
    """What the forward under ``key`` left is what ``left`` says; ``looked_up`` (the lookup's
    answer) names it, or says nothing and the key is voided."""
    done = await d.effects(task, key)
    if left == "effect":
        assert len(done) == 1, f"the forward should have taken effect once; the ledger has {done}"
        assert looked_up == done[0], f"the lookup named {looked_up!r}; the ledger has {done[0]!r}"
        first = await d.forward(task, key)
        again = await d.forward(task, key)
        assert first.status_code == 200 and first.json()[d.id_field] == done[0], first.text
        assert again.status_code == 200 and again.content == first.content, (first.text, again.text)
    else:
        assert done == [], f"the forward should have done nothing; the ledger has {done}"
        assert looked_up is None, f"the lookup named {looked_up!r} of a forward that did nothing"
        late = await d.forward(task, key)
        assert late.status_code == 409 and late.json()["error"] == "voided", late.text
        assert d.looked_up(await d.lookup(key)) is None
    assert await d.effects(task, key) == done, "a repeat had a second effect"


@pytest.mark.parametrize(("service", "kind"), CASES)
async def test_a_fault_on_a_forward_leaves_what_the_lookup_says(driver: Driver, service: str, kind: str) -> None:
    want = driver.kinds[kind]
    task, key = new_task()
    await driver.fault(task, kind)
    answer = await driver.forward(task, key)
    assert answer.status_code == want.status, answer.text
    await assert_kept(driver, task, key, want.left, driver.looked_up(await driver.lookup(key)))


@pytest.mark.parametrize(("service", "kind"), CASES)
async def test_a_lookup_while_the_faulted_forward_is_held_waits_for_it(driver: Driver, service: str, kind: str) -> None:
    """The forward is held at the service under its key (the fault's delay, then the fault acts);
    the lookup is sent once the forward holds the key, and (where the service shows it) the hold
    is lifted only once the lookup is seen waiting: so the lookup meets the forward in flight."""
    want = driver.kinds[kind]
    task, key = new_task()
    rule = await driver.fault(task, kind, hold_s=HOLD_S if driver.shows_waiting else EXAMPLE_HOLD_S)
    sending = asyncio.ensure_future(driver.forward(task, key))
    try:
        await wait_until(lambda: driver.hits(rule), lambda n: n == 1, timeout=10, interval=0.02, what="the hold")
        assert not sending.done(), "the forward was not held"
        looking = asyncio.ensure_future(driver.lookup(key))
        if driver.shows_waiting:
            await wait_until(
                lambda: driver.waiting(key),
                lambda seen: seen or looking.done(),
                timeout=10,
                interval=0.02,
                what="the lookup waiting for the key",
            )
            assert not looking.done(), f"the lookup answered while the forward was held: {looking.result().text}"
            await driver.lift(rule)
        answer, found = await sending, await looking
    finally:
        sending.cancel()
    assert answer.status_code == want.status, answer.text
    said = found
    if found.status_code >= 400 and found.json().get("error") == "in_flight":
        said = await driver.lookup(key)  # asked again, as the undo does; the forward has ended
    await assert_kept(driver, task, key, want.left, driver.looked_up(said))


@pytest.mark.parametrize(("service", "kind"), CASES)
async def test_a_fault_on_a_repeat_of_a_done_key_never_undoes_its_answer(
    driver: Driver, service: str, kind: str
) -> None:
    task, key = new_task()
    first = await driver.forward(task, key)
    assert first.status_code == 200, first.text
    await driver.fault(task, kind)
    hit = await driver.forward(task, key)
    assert hit.content == first.content or transient(hit), (
        f"a repeat of a done key under {kind} answered {hit.status_code} {hit.text[:200]}; the first {first.text}"
    )
    after = await driver.forward(task, key)
    assert after.status_code == 200 and after.content == first.content, after.text
    assert await driver.effects(task, key) == [first.json()[driver.id_field]]
    assert driver.looked_up(await driver.lookup(key)) == first.json()[driver.id_field]


async def test_a_rule_for_one_order_comes_before_the_broader_ones(demo: ServiceProcess) -> None:
    """The kit (and a test) holds one call with a rule for its order: a broader rule added
    before it, as a chaos mix is, must not take that call instead."""
    task, key = new_task()
    async with (
        httpx.AsyncClient(base_url=demo.url, timeout=30.0) as http,
        RemoteServicesAdmin(demo.url, admin_token=demo.admin_token) as admin,
    ):
        d = Payment(http, admin)
        broad = await admin.add_fault("payment.*", "transient", match_order_prefix=task)
        try:
            await admin.add_fault("payment.charge", "permanent", error="this_order", times=1, match_order_id=task)
            refused = await d.forward(task, key)
            assert refused.status_code == 422 and refused.json()["error"] == "this_order", refused.text
            after = await d.forward(task, key)
            assert after.status_code == 503, after.text  # the one-order rule spent, the broad one applies
        finally:
            await admin.remove_fault(broad)
