"""Waking the Supervisor when a failure is recorded, so it sweeps now rather than at its next tick.

A wake is a signal: an event in the Supervisor's history and a workflow task. Under a burst of
failures (a service down for many tasks) one wake per failure would make the Supervisor's
history grow by as many events as failures while a single sweep reads them all. So a worker
has at most one wake in flight per Supervisor: a failure recorded while one is on its way asks
for one more, sent once it has arrived, which is after that failure was written. The
Supervisor is therefore always woken after the last failure recorded; it never sees more wakes
than sweeps could use.

Waking only saves time: a Supervisor not running, or Temporal not answering, changes nothing
(the next sweep finds the failures all the same), so a wake never fails the record and the
record never waits for it.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client

log = logging.getLogger("sas.mirror")


class SupervisorWakes:
    """This worker's wakes, at most one in flight per Supervisor."""

    def __init__(self) -> None:
        self._sending: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def wake(self, client: Client, supervisor_id: str) -> None:
        """Wake the Supervisor after what has been recorded so far."""
        if supervisor_id in self._sending:
            self._again.add(supervisor_id)  # sent once the wake on its way has arrived
            return
        self._sending[supervisor_id] = asyncio.ensure_future(self._send(client, supervisor_id))

    async def _send(self, client: Client, supervisor_id: str) -> None:
        try:
            while True:
                self._again.discard(supervisor_id)
                try:
                    await client.get_workflow_handle(supervisor_id).signal("wake")
                except Exception as err:  # noqa: BLE001 - the next sweep finds the failures all the same
                    log.debug("could not wake the Supervisor %s: %s", supervisor_id, err)
                    return
                if supervisor_id not in self._again:
                    return
        finally:
            self._again.discard(supervisor_id)
            del self._sending[supervisor_id]
