"""What every worker that runs sas's workflows intercepts them with, in one list: the sas
worker's, the test kit's (``sas.api.testing``) and the Scheduler tests' workers all take it."""

from __future__ import annotations

from temporalio.worker import Interceptor

from sas.workflows.shell.arguments import OneArgument
from sas.workflows.shell.live_details import LiveDetails


def workflow_interceptors() -> list[Interceptor]:
    """A task workflow gets exactly one argument (``OneArgument``), and its metadata query
    answers with its current details (``LiveDetails``)."""
    return [OneArgument(), LiveDetails()]
