"""Seals: proof that a step's call came from sas's Scheduler and its result from sas's Agent.

Anyone with write access to the namespace can complete a running activity with a result of
their own (``temporal activity complete``), or schedule sas's Agents from a workflow of their
own that merely borrows a sas name. Neither can seal: a seal is an HMAC-SHA256, under a key only
sas's workers hold (``SAS_SEAL__KEYS``), over who asked and what for.

- **A call's seal** is made by the Scheduler when it starts an Agent (``shell/agents.py``) over
  the workflow id, run id, the Agent's name and the call's keys; an Agent's worker runs the call
  only if it verifies against the workflow Temporal says scheduled it
  (``sas/runtime/activity_owners.py``).
- **A result's seal** is made by the Agent over the same identity, the call's keys and the
  result's canonical JSON; the Scheduler takes a result only if it verifies
  (``shell/agents.py``, ``foreign_claim``). A result that does not is an outcome sas does not
  know: the step fails for good, and its undo's lookup at the service decides what was done.

The seal functions are pure (the key ring is set once, when the worker starts), so a workflow
may call them: a replay computes the same seal as the run it replays, under the same keys.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from typing import Any

# The error type of a step whose result no Agent of sas sealed: a failure for good, whose undo's
# lookup at the service decides what was done; the Supervisor raises a critical alert for it.
FOREIGN_RESULT = "ForeignResult"
# The audit action of a refused result; the state store raises the critical alert with it.
REFUSED_RESULT = "refuse result"
# How a ring is derived when no key is configured (docs/security.md): from the state store's URL,
# which every worker of a deployment shares and which a client of the namespace is not given.
_DERIVED_LABEL = b"sas seal key, derived from the state store URL"
_ring: tuple[bytes, ...] = ()


def install(keys: Sequence[bytes]) -> None:
    """Set the worker's key ring: the first key seals, every key verifies (a retired key stays
    while tasks sealed with it may still run)."""
    global _ring
    if not keys or any(len(k) < 16 for k in keys):
        raise ValueError("a seal key ring needs at least one key of at least 16 bytes")
    _ring = tuple(keys)


def installed() -> bool:
    return bool(_ring)


def _keys() -> tuple[bytes, ...]:
    """The ring; one key of this process's own when none was installed (a test kit's worker,
    a replayer): its Agents and its Scheduler then share it, and nothing outside does."""
    global _ring
    if not _ring:
        _ring = (os.urandom(32),)
    return _ring


def derived_key(database_url: str) -> bytes:
    """The key of a deployment that configures none: the same in every process that shares the
    state store's URL."""
    return hmac.new(database_url.encode(), _DERIVED_LABEL, hashlib.sha256).digest()


# The canonical text a seal is made over: sorted keys, no spaces, ASCII, no NaN. One encoder for
# the process (json.dumps with these options builds one at every call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
# Each key's HMAC with nothing fed yet, copied for every seal: naming the digest at every call
# has OpenSSL look it up again, which cost a Scheduler's seal several times the hash itself.
_KEYED: dict[bytes, Any] = {}


def _mac(key: bytes, parts: dict[str, Any]) -> str:
    keyed = _KEYED.get(key)
    if keyed is None:
        keyed = _KEYED[key] = hmac.new(key, digestmod=hashlib.sha256)
    mac = keyed.copy()
    mac.update(_CANONICAL.encode(parts).encode())
    # Its first 128 bits, in 22 characters: a seal rides on every call and result in the history,
    # and half an HMAC-SHA256 is as hard to forge as a 128-bit key is to guess (RFC 2104, 5).
    return base64.urlsafe_b64encode(mac.digest()[:16]).rstrip(b"=").decode()


def _call_parts(workflow_id: str, run_id: str, agent: str, call: Any) -> dict[str, Any]:
    return {
        "w": workflow_id,
        "r": run_id,
        "a": agent,
        "t": call.task_id,
        "s": call.step,
        "k": call.idempotency_key,
        "u": call.target_key,
        "c": call.compensation,
        "i": call.item_key,
        "n": call.stamp.seq,
    }


def call_seal(workflow_id: str, run_id: str, agent: str, call: Any) -> str:
    """The seal the Scheduler puts on a call (a ``StepCall``) it starts ``agent`` with."""
    return _mac(_keys()[0], _call_parts(workflow_id, run_id, agent, call))


def call_sealed(workflow_id: str, run_id: str, agent: str, call: Any) -> bool:
    """Whether ``call`` carries a seal made by a sas Scheduler of this very run for ``agent``."""
    seal = getattr(call, "seal", None)
    if not isinstance(seal, str):
        return False
    parts = _call_parts(workflow_id, run_id, agent, call)
    return any(hmac.compare_digest(seal, _mac(key, parts)) for key in _keys())


def _result_parts(workflow_id: str, run_id: str, agent: str, call: Any, data: dict[str, Any]) -> dict[str, Any]:
    return {**_call_parts(workflow_id, run_id, agent, call), "d": data}


def result_seal(workflow_id: str, run_id: str, agent: str, call: Any, data: dict[str, Any]) -> str:
    """The seal an Agent puts on the result ``data`` it returns for ``call``."""
    return _mac(_keys()[0], _result_parts(workflow_id, run_id, agent, call, data))


def result_sealed(workflow_id: str, run_id: str, agent: str, call: Any, result: Any) -> bool:
    """Whether ``result`` (a ``StepResult``) was sealed by a sas Agent for ``call`` of this run."""
    seal = getattr(result, "seal", None)
    if not isinstance(seal, str):
        return False
    try:
        parts = _result_parts(workflow_id, run_id, agent, call, result.data)
        return any(hmac.compare_digest(seal, _mac(key, parts)) for key in _keys())
    except (TypeError, ValueError):  # a claimed result that is not JSON was not sealed by anyone
        return False


def _checkpoint_parts(workflow_id: str, run_id: str, activity: str, activity_id: str, progress: Any) -> dict[str, Any]:
    return {"w": workflow_id, "r": run_id, "a": activity, "id": activity_id, "p": progress}


def checkpoint_seal(workflow_id: str, run_id: str, activity: str, activity_id: str, progress: dict[str, int]) -> str:
    """The seal an Agent puts on the checkpoint it heartbeats, so a later attempt resumes only
    from progress an Agent of sas saved (any client may heartbeat an activity with details)."""
    return _mac(_keys()[0], _checkpoint_parts(workflow_id, run_id, activity, activity_id, progress))


def checkpoint_sealed(workflow_id: str, run_id: str, activity: str, activity_id: str, progress: Any, seal: Any) -> bool:
    if not isinstance(seal, str):
        return False
    try:
        parts = _checkpoint_parts(workflow_id, run_id, activity, activity_id, progress)
        return any(hmac.compare_digest(seal, _mac(key, parts)) for key in _keys())
    except (TypeError, ValueError):
        return False
