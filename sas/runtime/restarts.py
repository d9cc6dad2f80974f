"""Keeps the processes of ``sas up`` alive: one that exits is started again after a back-off,
and one that keeps exiting soon after each start (a crash loop) stops the stack instead.

The point of the pattern is surviving crashes, so its local stack must not give up on the
first one. But a worker that cannot start (bad settings, a port taken, a broken import) would
be restarted forever, each time writing the same error to its log; after ``max_quick_exits``
such exits in a row, the stack stops and names the process and the log that says why.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sas.runtime.processes import Child, ProcessGroup


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    # A process that ran this long before it exited was working: its next exit starts a new count.
    stable_s: float = 60.0
    max_quick_exits: int = 5

    def delay_s(self, quick_exits: int) -> float:
        """The back-off before the restart that follows ``quick_exits`` quick exits in a row."""
        return min(self.first_delay_s * 2.0 ** max(quick_exits - 1, 0), self.max_delay_s)


class StackDown(Exception):
    """The stack cannot go on: a process that is not restarted exited, or one keeps crashing."""


def how_it_exited(child: Child) -> str:
    code = child.process.returncode
    if code is not None and code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


@dataclass
class _Record:
    started_at: float
    quick_exits: int = 0
    restart_at: float | None = None  # set while an exited process waits out its back-off


@dataclass
class StackKeeper:
    """Call ``tend()`` every second or so: it restarts what has exited and its back-off allows,
    returns one line per restart, and raises ``StackDown`` when the stack must stop."""

    group: ProcessGroup
    restartable: Callable[[Child], bool]
    policy: RestartPolicy = RestartPolicy()
    clock: Callable[[], float] = time.monotonic
    _records: dict[str, _Record] = field(default_factory=dict)

    def tend(self) -> list[str]:
        now = self.clock()
        lines = []
        for child in list(self.group.children):
            record = self._records.setdefault(child.name, _Record(started_at=now))
            if child.alive():
                continue
            if not self.restartable(child):
                raise StackDown(
                    f"{child.name} stopped unexpectedly ({how_it_exited(child)}); its log: {child.log_path}"
                )
            if record.restart_at is None:
                ran = now - record.started_at
                record.quick_exits = record.quick_exits + 1 if ran < self.policy.stable_s else 1
                if record.quick_exits > self.policy.max_quick_exits:
                    raise StackDown(
                        f"{child.name} keeps crashing: {record.quick_exits} exits in a row, each within"
                        f" {self.policy.stable_s:g}s of its start (last: {how_it_exited(child)}); its log: {child.log_path}"
                    )
                record.restart_at = now + self.policy.delay_s(record.quick_exits)
            if now >= record.restart_at:
                delay = self.policy.delay_s(record.quick_exits)
                again = self.group.respawn(child)
                self._records[child.name] = _Record(started_at=now, quick_exits=record.quick_exits)
                lines.append(
                    f"{child.name} (pid {child.pid}) exited with {how_it_exited(child)}; started again"
                    f" after {delay:g}s as pid {again.pid} (its log: {child.log_path})"
                )
        return lines
