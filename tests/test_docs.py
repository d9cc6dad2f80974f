"""Docs that stay true by construction (issue 25, item 7).

The site (mkdocs.yml, built by .ci/run with ``mkdocs build --strict``) generates its settings
reference from sas/settings/, so a setting without a description would be a hole in it: these
tests fail instead (tests/task_types/test_public_api.py does the same for the API reference's
docstrings). The README stays a front door that gives CI's test command."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

from sas.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Sample keys for the placeholders of a map of settings (SAS_STEPS__<STEP>__...).
SAMPLE_KEYS = {"<STEP>": "charge", "<TYPE>": "order", "<NAME>": "payment"}


def reference() -> ModuleType:
    """docs/hooks/settings_reference.py, the generator the site runs."""
    spec = importlib.util.spec_from_file_location("settings_reference", ROOT / "docs/hooks/settings_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_setting_has_a_description_and_every_group_says_what_it_is() -> None:
    groups = list(reference().groups(Settings))
    missing = [s.variable for g in groups for s in g.settings if not s.description.strip()]
    assert not missing, f"add a Field(description=...) in sas/settings/ for: {missing}"
    silent = [g.prefix for g in groups if g.settings and not g.doc.strip()]
    assert not silent, f"add a docstring to the model of: {silent}"


def test_the_reference_has_every_setting_the_readme_once_left_out() -> None:
    text = reference().render()
    for variable in ("SAS_SUPERVISOR__ORPHAN_BATCH", "SAS_SUPERVISOR__IDLE_BACKOFF", "SAS_DATABASE__ECHO"):
        assert f"| `{variable}` |" in text


def test_each_variable_the_reference_names_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable named wrongly would be ignored (extra="ignore"). Each number or flag the
    reference names is set to a value that is not one: the settings must refuse it."""
    for name in [n for n in os.environ if n.startswith("SAS_")]:
        monkeypatch.delenv(name)
    checked = 0
    for group in reference().groups(Settings):
        for setting in group.settings:
            if setting.type not in ("int", "float", "bool"):
                continue
            variable = setting.variable
            for placeholder, key in SAMPLE_KEYS.items():
                variable = variable.replace(placeholder, key.upper())
            with monkeypatch.context() as env:
                env.setenv(variable, "not-a-value")
                with pytest.raises(ValidationError):
                    Settings(_env_file=None)  # type: ignore[call-arg]
            checked += 1
    assert checked > 50


def test_the_readme_is_a_front_door_with_ci_s_test_command() -> None:
    readme = README.read_text()
    assert len(README.read_bytes()) <= 15_000, "the README is the front door: move details to docs/"
    ci = (ROOT / ".ci/run").read_text().splitlines()
    command = ci[ci.index("# The README's test command:") + 1]
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert any(command in block.splitlines() for block in blocks), f"the README does not give {command!r}"
    assert "## Build your own task type" in readme
