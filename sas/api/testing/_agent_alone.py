"""Testing one Agent alone: one attempt of it, as a worker runs it, against a service at a URL.

    result = await run_agent(charge, "http://127.0.0.1:8000", payload={...}, results={...})
    refund = await run_agent(refund, url, undo_of="charge", forward_result=result.data)

The Agent is an activity in Temporal's activity test environment (its attempt, complete-by and
heartbeat details as a worker gives them), calling the service through the same caller as on a
worker (the step's Idempotency-Key, the complete-by, the answer validated against the declared
result model); its mirror writes go nowhere. What the Agent raises (a refusal, garbage) is
raised here, as the worker would report it to Temporal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from temporalio.testing import ActivityEnvironment

from sas.activities.function_agents import FunctionAgents
from sas.activities.http_agent import HttpAgent
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.state_store.agent_writes.writer import WritesBehind
from sas.task_models import AcceptOutcome, MirrorStamp, StepCall, StepResult, StepTransition, TaskAccepted, seals
from sas.task_models.activity_defs import AgentRef, activity_name
from sas.task_models.queues import service_of
from sas.task_types.agent_declarations import agent_function
from sas.task_types.services import HttpCall
from sas.task_types.steps import results_read_by


class _NoMirror(WritesBehind):
    """The mirror writes of an Agent tested alone: kept, for a test that wants to see them."""

    def __init__(self) -> None:
        super().__init__()
        self.transitions: list[StepTransition] = []

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:  # pragma: no cover - Agents never accept
        raise NotImplementedError

    async def write(self, t: StepTransition) -> None:
        self.transitions.append(t)

    async def aclose(self) -> None:
        return None


async def run_agent(
    agent: AgentRef | HttpCall,
    url: str,
    *,
    task_id: str = "task-1",
    task_type: str = "test",
    step: str | None = None,
    payload: Mapping[str, Any] | None = None,
    results: Mapping[str, Mapping[str, Any]] | None = None,
    undo_of: str | None = None,
    forward_result: Mapping[str, Any] | None = None,
    attempt: int = 1,
    heartbeat_details: Sequence[Any] = (),
    checkpoint: Mapping[str, int] | None = None,
    complete_by_s: float = 10.0,
    headers: Mapping[str, str] | None = None,
) -> StepResult:
    """One attempt of ``agent`` (declared with ``Service.action``, or an ``HttpCall``) against the
    service at ``url``.

    Args:
        agent: What a step names as its ``forward`` or ``undo``.
        url: The service's base URL (a fake service of the test's own, on loopback).
        task_id, task_type: The task the attempt is for.
        step: The step's name (its key is ``<task_id>:<step>``); by default the Agent's action, or
            ``undo_of`` for an undo.
        payload: The task's input.
        results: The results of the steps done before, by step name; as the Scheduler sends them,
            only those the Agent reads (``Service.action(reads=)``, an ``HttpCall``'s ``Result``s).
        undo_of: For an undo: the forward step's name. The key is then ``<task_id>:<step>:undo``
            and the forward key ``<task_id>:<step>``, which ``forward_id`` looks up.
        forward_result: For an undo: the forward step's result, if the Scheduler has it.
        attempt, heartbeat_details: As Temporal gives them to a retried attempt: raw, as any
            client could have heartbeated them (a checkpoint no Agent sealed is ignored).
        checkpoint: The progress an earlier attempt's Agent saved (``save_checkpoint``), sealed
            as its heartbeat carries it: the attempt resumes from it.
        complete_by_s: The attempt's complete-by.
        headers: Sent with every call (the service's auth header).

    Returns:
        What the Agent returns: the service's answer as the declared result model.
    """
    name = agent.name if isinstance(agent, HttpCall) else activity_name(agent)
    _, _, action = name.rpartition(".")
    step_name = step or undo_of or action
    key = f"{task_id}:{step_name}"
    reads = None if undo_of else results_read_by(agent)
    call = StepCall(
        task_id=task_id,
        task_type=task_type,
        step=step_name,
        position=0,
        idempotency_key=f"{key}:undo" if undo_of else key,
        target_key=key if undo_of else None,
        compensation=undo_of is not None,
        payload=dict(payload or {}),
        stamp=MirrorStamp(seq=1),
        # What the Scheduler sends it: only the results it says it reads.
        results={k: dict(v) for k, v in (results or {}).items() if reads is None or k in reads},
        forward_result=dict(forward_result) if forward_result is not None else None,
    )
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info,
        activity_type=name,
        attempt=attempt,
        heartbeat_details=list(heartbeat_details),
        started_time=datetime.now(UTC),
        start_to_close_timeout=timedelta(seconds=complete_by_s),
        heartbeat_timeout=None,
    )
    if checkpoint is not None:
        # As an earlier attempt's Agent saved it: sealed, as its heartbeat is.
        info = environment.info
        seal = seals.checkpoint_seal(
            info.workflow_id or "", info.workflow_run_id or "", name, info.activity_id, dict(checkpoint)
        )
        sealed = {"checkpoint": dict(checkpoint), "seal": seal}
        environment.info = dataclasses.replace(info, heartbeat_details=[sealed])
    async with httpx.AsyncClient() as client:
        [run] = agents_against(client, url, [agent], timeout_s=complete_by_s, headers=headers)
        result: StepResult = await environment.run(run, call)
        return result


def agents_against(
    client: httpx.AsyncClient,
    url: str,
    agents: Iterable[AgentRef | HttpCall],
    *,
    timeout_s: float = 30.0,
    headers: Mapping[str, str] | None = None,
) -> list[Callable[..., Any]]:
    """The real activities of ``agents`` (declared with ``Service.action``, or ``HttpCall``), each
    calling its service at ``url`` through ``client``, with their mirror writes going nowhere."""
    writer, refused = _NoMirror(), RefusedWrites(None)  # type: ignore[arg-type]
    found: list[Callable[..., Any]] = []
    for agent in agents:
        name = agent.name if isinstance(agent, HttpCall) else activity_name(agent)
        remote = RemoteCaller(client, url, timeout_s=timeout_s, headers=headers, service=service_of(name))
        if isinstance(agent, HttpCall):
            found += HttpAgent(remote, writer, "sas-test", refused).activities([agent])
        elif agent_function(agent) is not None:
            found += FunctionAgents(remote, writer, "sas-test", refused).activities([agent])
        else:
            raise TypeError(f"{name}: only Agents declared with Service.action, or an HttpCall, run against a URL")
    return found
