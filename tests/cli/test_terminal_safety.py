"""Text from outside never reaches the terminal as it is: a remote result,
an operator's ``--by``/``--reason``, an alert. ESC sequences (clear the screen, OSC 8 links),
C1 controls and direction overrides are shown as visible escapes, by one sanitiser
(``sas/runtime/terminal.py``) behind every console and table."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.text import Text

from sas.cli import output
from sas.runtime.terminal import for_terminal
from sas.state_store import mirror
from sas.state_store.tables import Alert
from sas.task_models import StepState, StepTransition
from tests.cli.test_cli import sas
from tests.helpers import fresh_id
from tests.stack import Stack

CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;http://evil.example\x1b\\click me\x1b]8;;\x1b\\"
CSI_C1 = "\x9b31m"
RIGHT_TO_LEFT = "\u202egnp.exe"
HOSTILE = f"A{CLEAR}B{LINK}C{CSI_C1}D{RIGHT_TO_LEFT}\rE"
UNSAFE = ("\x1b", "\x9b", "\u202e", "\r")


def raw(text: str) -> list[str]:
    return [c for c in UNSAFE if c in text]


def test_the_sanitiser_shows_every_control_visibly() -> None:
    shown = for_terminal(HOSTILE)
    assert raw(shown) == []
    assert "\\x1b[2J" in shown and "\\x9b31m" in shown and "\\u202e" in shown and "\\x0d" in shown
    assert for_terminal("two\nlines\tand a tab") == "two\nlines and a tab"


def test_every_console_print_is_sanitised_even_without_the_helper() -> None:
    # A printing path that forgot ``shown``: the console's own guard still drops the controls.
    with output.console.capture() as captured:
        output.console.print(Text(HOSTILE))
        output.console.print(output.table("t", ["id", "what"], [["x", HOSTILE]]))
    with output.err_console.capture() as errors:
        output.err_console.print(HOSTILE, markup=False)
    assert raw(captured.get()) == [] and raw(errors.get()) == []
    assert "\\x1b[2J" in captured.get()  # the table's cells show them


async def test_operator_fields_and_remote_results_print_safely(stack: Stack) -> None:
    task_id = fresh_id("ansi")
    handle = await stack.submit(task_id)
    await handle.result()
    # What a remote service answered, as the mirror keeps it: a result field with escapes.
    record = await stack.record(task_id)
    assert record is not None
    async with stack.sessions() as session:
        changed = await mirror.record_transitions(
            session,
            [
                StepTransition(
                    task_id=task_id,
                    step="reserve",
                    version=2**62,  # above any write of the run
                    state=StepState.PROCESSED,
                    at=datetime.now(UTC),
                    result={"reservation_id": "rsv_1", "sku": HOSTILE, "quantity": 2},
                    chain_id=record.task.chain_id,
                )
            ],
        )
    assert changed == 1

    # An operator's `--by` with controls is refused before anything is done, and the refusal
    # shows them as escapes.
    refused = await sas(stack, "services", "open", "inventory", "--by", HOSTILE, "--reason", "why")
    assert refused.returncode == 2 and raw(refused.stderr) == [] and "\\x1b" in refused.stderr
    # Text that reached the store another way (an alert's message) is shown visibly too.
    now = datetime.now(UTC)
    async with stack.sessions() as session, session.begin():
        session.add(
            Alert(
                incident_key=f"hostile:{task_id}", severity="warning", kind="hostile", task_id=task_id, step=None,
                failure_count=0, message=HOSTILE, last_error=HOSTILE, suggested_action=HOSTILE, status="open",
                created_at=now, updated_at=now, delivery_attempts=0,
            )
        )  # fmt: skip

    for args in (("alerts", "--status", "all"), ("services",), ("show", task_id), ("list",)):
        done = await sas(stack, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert raw(done.stdout) == [] and raw(done.stderr) == [], args
    shown = (await sas(stack, "show", task_id)).stdout
    assert "\\x1b[2J" in shown  # shown, visibly, not hidden
    alerts = (await sas(stack, "alerts", "--status", "all")).stdout
    assert "\\x1b]8;;http://evil.example" in alerts
