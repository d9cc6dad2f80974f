"""The Supervisor workflow calls its activities through ``supervisor/activity_stubs.py``; the
worker registers the classes that do the work. They must agree on every name - the names
recorded in every Supervisor history - and on the types, or a sweep would schedule an activity
that no worker runs, found only at run time."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from temporalio.activity import _Definition  # the SDK's own reading of @activity.defn
from temporalio.client import Client

import state_store
from supervisor import activity_stubs
from supervisor.worker import supervisor_activities
from tests import stack

STUBS = [
    activity_stubs.scan,
    activity_stubs.apply,
    activity_stubs.check_orphans,
    activity_stubs.check_queues,
    activity_stubs.deliver_alerts,
]
# Renaming any of these breaks the replay of every Supervisor history.
RECORDED_NAMES = {
    "supervisor.scan",
    "supervisor.apply",
    "supervisor.check_orphans",
    "supervisor.check_queues",
    "supervisor.deliver_alerts",
}


def by_name(functions: list[Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    return {_Definition.must_from_callable(fn).name or "": fn for fn in functions}


def parameter_types(fn: Callable[..., Any]) -> list[Any]:
    hints = typing.get_type_hints(fn)
    return [hints[name] for name in fn.__code__.co_varnames[: fn.__code__.co_argcount] if name != "self"]


async def test_each_stub_is_a_registered_activity_with_its_types(
    client: Client, temporal_address: str, sqlite_url: str
) -> None:
    settings = stack.test_settings(temporal_address, "http://127.0.0.1:9", sqlite_url)
    engine = state_store.create_engine(settings.database)
    try:
        registered = by_name(supervisor_activities(client, settings, state_store.session_factory(engine), "stub-test"))
    finally:
        await engine.dispose()
    stubs = by_name(STUBS)
    assert set(stubs) == set(registered) == RECORDED_NAMES
    for name, stub in stubs.items():
        implementation = registered[name]
        assert typing.get_type_hints(stub)["return"] == typing.get_type_hints(implementation)["return"], name
        wanted, taken = parameter_types(stub), parameter_types(implementation)
        assert len(wanted) == len(taken), name
        for sent, accepted in zip(wanted, taken, strict=True):
            # What the workflow sends is what the implementation takes (or one of the types it takes).
            assert sent == accepted or sent in typing.get_args(accepted), f"{name}: {sent} vs {accepted}"
