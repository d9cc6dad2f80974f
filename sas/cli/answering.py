"""Which workflow answers for a task: the client's (``sas.client.answering``), named here for
the commands that ask."""

from sas.client.answering import CLEANUP_PREFIX, Answering, answering_workflow, cleanup_id, run_status

__all__ = ["CLEANUP_PREFIX", "Answering", "answering_workflow", "cleanup_id", "run_status"]
