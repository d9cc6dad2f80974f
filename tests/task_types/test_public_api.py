"""sas.api is a team's one import place, split by who imports it (sas.api for a task type's
module, sas.api.testing, sas.api.contract, sas.api.client, sas.api.agent_class): each name is
in one module's ``__all__``, reachable from sas.api, and says what it is in the docstring that
the docs site's API reference shows (docs/api.md)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import griffe

import sas.api

ROOT = Path(__file__).resolve().parents[2]
AUDIENCES = ("sas.api.agent_class", "sas.api.client", "sas.api.contract", "sas.api.testing")


def public_modules() -> list[ModuleType]:
    return [sas.api, *(importlib.import_module(m) for m in AUDIENCES)]


def test_the_audiences_are_the_public_modules_and_the_type_checker_sees_each() -> None:
    """Every module of sas.api without a leading underscore is an audience whose names sas.api
    loads when asked for, and is imported for the type checker: a new one cannot be left out."""
    assert sorted(set(sas.api._audiences().values())) == list(AUDIENCES)
    tree = ast.parse((ROOT / "sas" / "api" / "__init__.py").read_text())
    typing_only = [
        node.module
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["*"]
    ]
    assert typing_only == list(AUDIENCES)


def test_each_name_is_in_one_module_and_reachable_from_sas_api() -> None:
    """Listed once: in the ``__all__`` of the one module that holds it, and sas.api's own
    ``__getattr__`` reads the others' ``__all__`` as Python does when the module runs."""
    seen: dict[str, str] = {}
    for module in public_modules():
        for name in module.__all__:
            assert name not in seen, f"{name} is in {seen[name]} and {module.__name__}"
            seen[name] = module.__name__
            assert getattr(sas.api, name) is getattr(module, name), name
        if module is not sas.api:
            assert {n for n, m in sas.api._audiences().items() if m == module.__name__} == set(module.__all__)
    assert "FakeAgents" in seen and "TaskClient" in seen and "TaskDefinition" in seen


def test_each_module_is_in_the_api_reference_and_its_docstring_links_each_of_its_names() -> None:
    """docs/api.md renders each module (its docstring, then every name of its ``__all__``); the
    docstring's groups link every name of the module, so that none is left out of them."""
    page = (ROOT / "docs" / "api.md").read_text()
    for module in public_modules():
        assert re.search(rf"^::: {re.escape(module.__name__)}$", page, re.M), module.__name__
        linked = set(re.findall(rf"\]\[{re.escape(module.__name__)}\.(\w+)\]", module.__doc__ or ""))
        linked -= {m.rpartition(".")[2] for m in AUDIENCES}  # sas.api's table links the modules
        assert linked == set(module.__all__), f"{module.__name__}: its docstring links {linked ^ set(module.__all__)}"


def test_every_public_name_resolves_and_is_documented() -> None:
    """Read as the site reads them: statically, with griffe. A class's own docstring counts, not
    one inherited from pydantic or Enum; a value's is the string after its assignment."""
    package = griffe.load("sas", search_paths=[str(ROOT)], resolve_aliases=True, resolve_external=False)
    undocumented = []
    for module in public_modules():
        found = package[module.__name__.removeprefix("sas.")]
        assert found.docstring is not None and found.docstring.value.strip()
        for name in module.__all__:
            target = found[name]
            target = target.final_target if isinstance(target, griffe.Alias) else target
            if target.docstring is None or not target.docstring.value.strip():
                undocumented.append(f"{module.__name__}.{name}")
    assert undocumented == [], f"public names without a docstring: {undocumented}"


def test_a_task_type_module_loads_nothing_heavy() -> None:
    """Importing sas.api (as a task type's module does, in the workflow sandbox) loads neither the
    Agents' HTTP stack nor the state store nor the other public modules; those load when one of
    their names is asked for, and a name that is none of theirs loads nothing."""
    probe = (
        "import sys, sas.api\n"
        "from sas.api import *\n"
        "assert not hasattr(sas.api, 'no_such_name')\n"
        "heavy = ('httpx', 'sqlalchemy', 'sas.activities.agent', 'temporalio.testing', 'temporalio.client', *AUDIENCES)\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "sas.api.FakeAgents\n"
        "print('sas.api.testing' in sys.modules)\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", f"AUDIENCES = {AUDIENCES!r}\n{probe}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert loaded.stdout.split() == ["True"]


def test_what_the_examples_import_from_sas_is_public() -> None:
    import sas_orders.agents
    import sas_orders.steps
    import sas_trip.agents
    import sas_trip.ticketed
    import sas_trip.workflows

    for module in (sas_orders.agents, sas_orders.steps, sas_trip.agents, sas_trip.ticketed, sas_trip.workflows):
        source = inspect.getsource(module)
        assert not re.search(r"from sas\.(?!api\b)", source), module.__name__
