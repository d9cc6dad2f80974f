"""sas.api is the one import place of a team, and every name in it says what it is: a class or
function by its docstring, a value in the module's docstring."""

from __future__ import annotations

import inspect
import subprocess
import sys

import sas.api

# Values (not classes or functions): each is named in the module's docstring, with what it is.
VALUES = {"ENTRY_POINT_GROUP", "ProviderId", "Secret", "UserText"}


def test_every_public_name_resolves_and_is_documented() -> None:
    undocumented = []
    for name in sas.api.__all__:
        value = getattr(sas.api, name)
        if name in VALUES:
            assert f":data:`{name}`" in (sas.api.__doc__ or ""), name
        elif not (value.__dict__.get("__doc__") if isinstance(value, type) else value.__doc__):
            undocumented.append(name)  # its own docstring: not one inherited from pydantic or Enum
    assert undocumented == [], f"public names without a docstring: {undocumented}"


def test_a_task_type_module_loads_nothing_heavy() -> None:
    """Importing sas.api (as a task type's module does, in the workflow sandbox) loads neither the
    Agents' HTTP stack nor the state store; those load when an Agent or a test helper is asked for."""
    probe = (
        "import sys, sas.api\n"
        "heavy = [m for m in ('httpx', 'sqlalchemy', 'sas.activities.agent', 'temporalio.testing') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == ""


def test_what_the_examples_import_from_sas_is_public() -> None:
    import sas_orders.agents
    import sas_orders.steps
    import sas_trip.agents
    import sas_trip.workflows

    for module in (sas_orders.agents, sas_orders.steps, sas_trip.agents, sas_trip.workflows):
        source = inspect.getsource(module)
        assert "from sas." not in source.replace("from sas.api import", ""), module.__name__
