"""The Supervisor workflow calls its activities through their declarations
(``supervisor/activity_defs.py``); the worker registers the classes that do the work. Each
registered activity must implement its declaration under the same name - the names recorded in
every Supervisor history - or a sweep would schedule an activity that no worker runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.activity import _Definition  # the SDK's own reading of @activity.defn
from temporalio.client import Client

from sas import state_store
from sas.supervisor.activity_defs import AlertDeliveryDefs, ApplyDefs, OrphanDefs, QueueDefs, ScanDefs
from sas.supervisor.run.worker import supervisor_activities
from tests import stack

DECLARED: dict[Callable[..., Any], type] = {
    ScanDefs.scan: ScanDefs,
    ApplyDefs.apply: ApplyDefs,
    OrphanDefs.check_orphans: OrphanDefs,
    QueueDefs.check_queues: QueueDefs,
    AlertDeliveryDefs.deliver_alerts: AlertDeliveryDefs,
}
# Renaming any of these breaks the replay of every Supervisor history.
RECORDED_NAMES = {
    "supervisor.scan",
    "supervisor.apply",
    "supervisor.check_orphans",
    "supervisor.check_queues",
    "supervisor.deliver_alerts",
}


def name_of(fn: Callable[..., Any]) -> str:
    return _Definition.must_from_callable(fn).name or ""


async def test_each_registered_activity_implements_its_declaration_under_its_name(
    client: Client, temporal_address: str, sqlite_url: str
) -> None:
    settings = stack.test_settings(temporal_address, "http://127.0.0.1:9", sqlite_url)
    engine = state_store.create_engine(settings.database)
    try:
        registered = supervisor_activities(client, settings, state_store.session_factory(engine), "defs-test")
    finally:
        await engine.dispose()
    by_name = {name_of(fn): fn for fn in registered}
    assert {name_of(fn) for fn in DECLARED} == set(by_name) == RECORDED_NAMES
    for declared, defs in DECLARED.items():
        implementation = by_name[name_of(declared)]
        # A subclass of the declaring class, so mypy holds its method to the declared types.
        assert isinstance(getattr(implementation, "__self__", None), defs), name_of(declared)
        assert implementation.__name__ == declared.__name__
