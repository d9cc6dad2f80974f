"""What can go wrong when code asks sas for something, as types a caller can catch.

Every error the client raises is a ``ClientError``: ``message`` is one line saying what is
wrong (the task id and the state it is in, the value refused and why), ``hint`` what to do
about it (worded for an operator; it may name a ``sas`` command that does the same). The
command line prints the two as they are, so its words and the client's are one.
"""

from __future__ import annotations


class ClientError(Exception):
    """Something the caller can act on: ``message`` says what, ``hint`` (may be None) what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


class InvalidInput(ClientError):
    """A value given to the client is refused before anything is done: an unknown task type, an
    input its model refuses (``problems`` lists each field and why), an id, actor or reason out of
    its bounds. ``field`` names the argument at fault when there is one."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        field: str | None = None,
        problems: list[tuple[tuple[str | int, ...], str]] | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.field = field
        self.problems = problems or []


class TaskNotFound(ClientError):
    """Neither Temporal nor the state store knows the task (or the schedule, or the incident)."""


class TaskIdTaken(ClientError):
    """A task id is one task, forever: this id already names one (running or finished), so
    nothing new was started. ``state`` is where that task stands, when known."""

    def __init__(self, message: str, hint: str | None = None, *, state: str | None = None) -> None:
        super().__init__(message, hint)
        self.state = state


class NotApplicable(ClientError):
    """The task exists, but the action does not apply to it as it stands: its workflow refused
    the request (the validator's reason is in ``message``), it has finished, or there is nothing
    to act on (no step waits, nothing to park, it has already started)."""


class OutsideTeam(NotApplicable):
    """The client acts for one team (``TaskClient(team=...)``, ``SAS_OPERATOR__TEAM``) and the
    task is of another team's type, or of a type no team owns: nothing was done."""


class NotConfirmed(ClientError):
    """The action was sent, but sas did not see it take effect in time (no worker applied it,
    Temporal did not confirm it). It may still apply: look at the task before acting again."""


class Unreachable(ClientError):
    """Temporal or the state store cannot be reached, turned the client away, or is not there."""


class Unhealthy(ClientError):
    """A health check failed: no process of this host polls the role's task queue within its
    bound, a Supervisor shard's workflow does not run or has not swept, or Temporal, which the
    check asks, cannot be reached."""
