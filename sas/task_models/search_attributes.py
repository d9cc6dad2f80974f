"""Custom search attributes the Scheduler keeps up to date, so an operator can filter
workflows in the Temporal UI ("SasNeedsOperator = true", "SasFailureCount >= 3").

They are not encrypted: never put customer data in them."""

from __future__ import annotations

SEARCH_ATTRIBUTES: dict[str, str] = {
    "SasTaskState": "Keyword",
    "SasCurrentStep": "Keyword",
    "SasFailureCount": "Int",
    "SasNeedsOperator": "Bool",
}


def dev_server_flags() -> list[str]:
    """``--search-attribute NAME=TYPE`` flags for ``temporal server start-dev``, and the dynamic config
    that makes the server mark a workflow whose workflow task keeps failing (the system search
    attribute ``TemporalReportedProblems``), so the Supervisor can find one that never reached sas,
    and that hands out a backlog by fairness key (``FAIRNESS_CONFIG``)."""
    flags: list[str] = []
    for name, kind in SEARCH_ATTRIBUTES.items():
        flags += ["--search-attribute", f"{name}={kind}"]
    flags += ["--dynamic-config-value", f"{REPORTED_PROBLEMS_CONFIG}=2"]
    for partitions in PARTITION_CONFIGS:
        flags += ["--dynamic-config-value", f"{partitions}=1"]
    flags += ["--dynamic-config-value", f"{FAIRNESS_CONFIG}=true"]
    return flags


# Server dynamic config: consecutive workflow task failures before TemporalReportedProblems is set.
REPORTED_PROBLEMS_CONFIG = "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute"


# A single-node server gains nothing from spreading a task queue over partitions (a cluster does, to
# spread its load over matching hosts); with one, a task needs no forwarding between partitions.
PARTITION_CONFIGS = ("matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions")


# Without it the server (1.32) takes each task's fairness key and weight and ignores them: one
# team's backlog is handed out ahead of another team's single task, in arrival order. It implies
# the priority matcher (matching.useNewMatcher). docker-compose.yml's server sets it too.
FAIRNESS_CONFIG = "matching.enableFairness"


# Typed keys, used by the Scheduler to upsert and by clients to build queries.
from temporalio.common import SearchAttributeKey  # noqa: E402

TASK_STATE = SearchAttributeKey.for_keyword("SasTaskState")
CURRENT_STEP = SearchAttributeKey.for_keyword("SasCurrentStep")
FAILURE_COUNT = SearchAttributeKey.for_int("SasFailureCount")
NEEDS_OPERATOR = SearchAttributeKey.for_bool("SasNeedsOperator")
