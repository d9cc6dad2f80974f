"""A team's short driver program, as ``run_driver``'s docstring shows it: connect, wait for one
task, print how it ended, and exit through ``run_driver``. Its settings come from SAS_*
variables; its one argument is the task's id (the test starts the task)."""

from __future__ import annotations

import sys

from sas.api.client import TaskClient, run_driver


async def main() -> None:
    async with await TaskClient.connect(actor="driver-program") as client:
        outcome = await client.wait(sys.argv[1])
    print(outcome.state)


if __name__ == "__main__":
    run_driver(main)
