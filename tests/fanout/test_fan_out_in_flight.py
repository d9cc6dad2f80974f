"""A fan-out undone while one of its items' calls is still held at the payroll service (a
``hang`` recipient, paid only once the test lets it go): past its tolerance while that call's
batch runs, by an operator's compensate, by the workflow's cancellation, and by the clean-up of
a task terminated meanwhile. In each an undo asks the lookup about the held payment while it is
held, the task is not called Compensated while that payment may still land, and once it lands
it is refunded: the ledger nets to zero (each payment made once and refunded once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from bench._payroll_service import Ledger, payroll_service
from sas.api.client import TaskClient
from sas.task_models import StepPolicyValues, StepState, TaskResult, TaskState
from tests.fanout.test_fan_out_e2e import payroll_stack, payroll_type
from tests.helpers import fresh_id, serving, wait_until
from tests.stack import Stack

pytestmark = pytest.mark.slow
__all__ = ["payroll_type"]  # the fixture, used by name

# An undo's lookup waits at the service while the held payment is served: long enough that the
# test lets the payment go before the undo gives up (the ladder is not what is tested here).
PATIENT_UNDO = StepPolicyValues(complete_by_s=30, max_attempts=5, initial_interval_s=0.2, max_interval_s=1)
WIDE = "PayrollWideWorkflow"


@pytest_asyncio.fixture
async def held_payroll() -> AsyncIterator[tuple[str, Ledger]]:
    ledger = Ledger()
    try:
        async with serving(payroll_service(ledger), "the payroll service") as url:
            try:
                yield url, ledger
            finally:
                ledger.released.set()  # a held call ends, so the service can stop
    finally:
        ledger.released.set()


@pytest_asyncio.fixture
async def held_stack(
    payroll_type: None,
    held_payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> AsyncIterator[tuple[Stack, Ledger]]:
    """A stack whose payroll service can hold a call, with an undo patient enough to wait for it."""
    url, ledger = held_payroll
    async with payroll_stack(url, client, temporal_address, services, sqlite_url, compensation=PATIENT_UNDO) as stack:
        yield stack, ledger


def people(*ids: str) -> dict[str, Any]:
    return {"recipients": [{"id": who, "cents": 100 + n} for n, who in enumerate(ids)]}


def payments(ledger: Ledger) -> Counter[str]:
    return Counter(who for action, who in ledger.entries if action == "pay")


def refunds(ledger: Ledger) -> Counter[str]:
    return Counter(who for action, who in ledger.entries if action == "refund")


async def held(ledger: Ledger, who: str) -> None:
    async def holding() -> set[str]:
        return set(ledger.holding)

    await wait_until(holding, lambda now: who in now, what=f"{who}'s payment held at the service")


async def paid(ledger: Ledger, count: int) -> None:
    async def made() -> int:
        return sum(payments(ledger).values())

    await wait_until(made, lambda n: n >= count, what=f"{count} payments made")


async def asked_while_held(ledger: Ledger, who: str) -> None:
    """Wait until an undo asks the lookup about ``who``'s key while its payment is still held: the
    moment an undo that did not wait for the call would decide there was nothing to refund."""

    async def asked() -> bool:
        return any(key.endswith(f":{who}") for key in ledger.lookups)

    await wait_until(asked, timeout=120, what=f"the lookup of {who}'s payment")


async def let_go_and_settle(stack: Stack, ledger: Ledger, task_id: str, held_one: str) -> None:
    """The held call is still at the service: the task must not be Compensated yet, nor the held
    payment's key voided. Then it is let go (its payment lands), and the task must end
    Compensated with that payment refunded too."""
    assert ledger.holding == {held_one}
    assert not any(key.endswith(f":{held_one}") for key in ledger.voided)
    assert await stack.task_state(task_id) != TaskState.COMPENSATED
    ledger.released.set()
    await wait_until(
        lambda: stack.task_state(task_id), lambda s: s == TaskState.COMPENSATED, timeout=120, what="Compensated"
    )


async def test_past_the_tolerance_while_another_batch_holds_a_call(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    # The first wave is two batches: refuse0 and refuse1 (one more than tolerated) in the first,
    # hang0's payment held at the service in the second.
    payload = people("refuse0", "refuse1", "r2", "r3", "hang0", "r5", "r6", "r7", *(f"r{n}" for n in range(8, 16)))
    task_id = fresh_id("payroll-held-past")
    handle = await stack.submit(task_id, payload, WIDE)
    await held(ledger, "hang0")
    await asked_while_held(ledger, "hang0")
    await let_go_and_settle(stack, ledger, task_id, "hang0")
    result: TaskResult = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert result.steps[0].state == StepState.COMPENSATED and result.steps[0].error_type == "FanOutPastTolerance"
    # The second wave never began; of the first, everything paid was refunded, the held one too.
    assert payments(ledger) == refunds(ledger) == Counter(["r2", "r3", "hang0", "r5", "r6", "r7"])


async def test_compensated_by_an_operator_while_a_call_is_held(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    payload = people("r0", "r1", "r2", "r3", "hang0", "r5", "r6", "r7", *(f"r{n}" for n in range(8, 16)))
    task_id = fresh_id("payroll-held-compensate")
    handle = await stack.submit(task_id, payload, WIDE)
    await held(ledger, "hang0")
    await paid(ledger, 7)  # the rest of the first wave: r0 to r3, r5 to r7
    await TaskClient(stack.client, stack.settings).compensate(task_id, by="ops", reason="stop the run")
    await asked_while_held(ledger, "hang0")
    await let_go_and_settle(stack, ledger, task_id, "hang0")
    result: TaskResult = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert payments(ledger)["hang0"] == 1
    assert payments(ledger) == refunds(ledger) and set(payments(ledger).values()) == {1}
    assert len(payments(ledger)) < len(payload["recipients"])  # compensated mid-fan-out


async def test_terminated_while_a_call_is_held_the_clean_up_waits_for_it(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    payload = people("r0", "r1", "r2", "r3", "hang0", "r5", "r6", "r7", *(f"r{n}" for n in range(8, 16)))
    task_id = fresh_id("payroll-held-terminated")
    handle = await stack.submit(task_id, payload, WIDE)
    await held(ledger, "hang0")
    await paid(ledger, 7)  # the rest of the first wave: r0 to r3, r5 to r7
    await handle.terminate("closed from outside while a payment is held")
    # The Supervisor finds the task dead and starts its clean-up, which undoes the items.
    await asked_while_held(ledger, "hang0")
    await let_go_and_settle(stack, ledger, task_id, "hang0")
    record = await stack.record(task_id)
    assert record is not None
    assert {s.name: s.state for s in record.steps} == {"pay": StepState.COMPENSATED, "report": StepState.SKIPPED}
    assert payments(ledger)["hang0"] == 1
    assert payments(ledger) == refunds(ledger) and set(payments(ledger).values()) == {1}
    assert len(payments(ledger)) < len(payload["recipients"])  # terminated mid-fan-out


async def test_cancelled_from_temporal_while_a_call_is_held(
    held_stack: tuple[Stack, Ledger],
) -> None:
    # The one way in which the items' calls are cancelled rather than waited for: the batches are
    # cancelled with the workflow, and the held call is left at the service; the lookup decides.
    stack, ledger = held_stack
    payload = people("r0", "r1", "r2", "r3", "hang0", "r5", "r6", "r7", *(f"r{n}" for n in range(8, 16)))
    task_id = fresh_id("payroll-held-cancelled")
    handle = await stack.submit(task_id, payload, WIDE)
    await held(ledger, "hang0")
    await paid(ledger, 7)  # the rest of the first wave: r0 to r3, r5 to r7
    await handle.cancel()
    await asked_while_held(ledger, "hang0")
    await let_go_and_settle(stack, ledger, task_id, "hang0")
    result: TaskResult = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert payments(ledger)["hang0"] == 1
    assert payments(ledger) == refunds(ledger) and set(payments(ledger).values()) == {1}
    assert len(payments(ledger)) < len(payload["recipients"])  # cancelled mid-fan-out
