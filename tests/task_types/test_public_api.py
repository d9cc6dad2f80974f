"""sas.api is the one import place of a team, and every name in it says what it is, in the
docstring that the docs site's API reference shows (docs/api.md)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import griffe

import sas.api

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_and_is_documented() -> None:
    """Read as the site reads them: statically, with griffe. A class's own docstring counts, not
    one inherited from pydantic or Enum; a value's is the string after its assignment."""
    package = griffe.load("sas", search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False)
    api = package["api"]
    assert api.docstring is not None and api.docstring.value.strip()
    undocumented = []
    for name in sas.api.__all__:
        getattr(sas.api, name)
        target = api[name]
        target = target.final_target if isinstance(target, griffe.Alias) else target
        if target.docstring is None or not target.docstring.value.strip():
            undocumented.append(name)
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
    import sas_trip.ticketed
    import sas_trip.workflows

    for module in (sas_orders.agents, sas_orders.steps, sas_trip.agents, sas_trip.ticketed, sas_trip.workflows):
        source = inspect.getsource(module)
        assert "from sas." not in source.replace("from sas.api import", ""), module.__name__
