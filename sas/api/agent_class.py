"""The older form of a hand-written Agent: a declarations class implemented by a subclass of
[`Agent`][sas.api.agent_class.Agent] that ``Service(agent="module:Class")`` names, each method
under [`implements`][sas.api.agent_class.implements]. Deprecated: it runs until sas 1.0, and
each service declared so warns once when its module loads. Write one function per call
instead, declared with [`Service.action`][sas.api.Service.action] and given an
[`AgentContext`][sas.api.AgentContext], whose methods do what the helpers here do:
[`attempt_deadline`][sas.api.agent_class.attempt_deadline],
[`parse_payload`][sas.api.agent_class.parse_payload],
[`save_checkpoint`][sas.api.agent_class.save_checkpoint],
[`last_checkpoint`][sas.api.agent_class.last_checkpoint].
"""

from __future__ import annotations

from sas.activities.agent import Agent, attempt_deadline, parse_payload
from sas.activities.heartbeats import last_checkpoint, save_checkpoint
from sas.task_models.activity_defs import implements

__all__ = [
    "Agent",
    "attempt_deadline",
    "implements",
    "last_checkpoint",
    "parse_payload",
    "save_checkpoint",
]
