"""Mutation testing of the rules that carry sas's promise: each rule broken on purpose, one at a
time, must fail a fast test (docs/testing.md, "Mutation testing").

    python -m bench.mutation                     # every module below
    python -m bench.mutation requests policy     # some of them

The tool is mutmut (3.x, the ``dev`` extra; its settings are ``[tool.mutmut]`` in pyproject.toml).
mutmut mutates a copy of the sources (its ``mutants/`` folder) and imports them from there, never
the files in the working tree. The copy is made here, in a workspace of its own (``--work``,
``.sas/mutation/`` by default), for two reasons: ``sas/workflows``, ``sas/supervisor`` and
``sas/activities`` are links, and mutmut walks its sources without following links, so the
workspace holds ``sas/`` with the linked folders copied in; and nothing of the run lands in the
working tree. One mutant at a time (``--max-children 1``): the tests are pure and fast, and the
machine is shared.

Each module is run with its own fast tests only (no dev server, no database): mutmut runs, for
each mutant, the tests that called the function it changed. The model test of the core
(``tests/scheduler/test_core_model.py``) runs with a fixed seed and a smaller profile
(``MODEL_EXAMPLES`` examples, no example database), so a mutant is killed or survives the same
way every run. A survivor that is not listed in ``EQUIVALENT`` (the mutant behaves as the original)
or ``UNREACHABLE`` (no input reaches its line) makes the command exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORK = ROOT / ".sas" / "mutation"

_SCHEDULER = "tests/scheduler/"
_MODEL = _SCHEDULER + "test_core_model.py"

# Each module under test, and the fast tests that hold it to its rules.
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "machine": (
        "sas/workflows/core/machine.py",
        (
            _SCHEDULER + "test_core.py",
            _SCHEDULER + "test_pivot_core.py",
            _SCHEDULER + "test_core_mutants.py",
            _SCHEDULER + "test_machine_mutants.py",
            _MODEL,
        ),
    ),
    "requests": (
        "sas/workflows/core/requests.py",
        (_SCHEDULER + "test_core.py", _SCHEDULER + "test_pivot_core.py", _SCHEDULER + "test_core_mutants.py", _MODEL),
    ),
    "fanout": (
        "sas/workflows/core/fanout.py",
        ("tests/fanout/test_fan_out_core.py", "tests/fanout/test_fan_out_core_mutants.py", _MODEL),
    ),
    "children": (
        "sas/workflows/core/children.py",
        ("tests/task_types/test_child_checks.py", _SCHEDULER + "test_children_mutants.py", _MODEL),
    ),
    "policy": (
        "sas/supervisor/decide/policy.py",
        (
            "tests/supervisor/test_policy.py",
            "tests/supervisor/test_policy_pivot.py",
            "tests/supervisor/test_policy_vetoes.py",
            "tests/supervisor/test_policy_mutants.py",
        ),
    ),
    "outside": ("sas/supervisor/decide/outside.py", ("tests/supervisor/test_outside_decisions.py",)),
    "seals": ("sas/task_models/seals.py", (_SCHEDULER + "test_seals.py",)),
}

# The model test's seed and size under mutation: fixed, so that every run judges a mutant alike.
MODEL_SEED = "1363134460"
MODEL_EXAMPLES = 60
HYPOTHESIS_PROFILE = "mutation"

# Survivors that are not bugs the tests miss: the mutant behaves as the original does. Keyed by
# module, then by the function's mangled name and the mutated line as mutmut writes it.
EQUIVALENT: dict[str, dict[tuple[str, str], str]] = {
    "fanout": {
        ("x_run_s", "if items < 0:"): "at 0 items no batch and no round follow: the time worked out is 0 too",
    },
    "machine": {
        (
            "xǁTaskCoreǁstages",
            "for previous, plan in zip([None, *ordered], ordered, strict=None):",
        ): "zip tests strict for truth: None is False, its default",
        (
            "xǁTaskCoreǁstages",
            "for previous, plan in zip([None, *ordered], ordered, ):",
        ): "strict=False is zip's default",
        (
            "xǁTaskCoreǁdone",
            "self.set(name, None, task_state)",
        ): "the set before has made the step Processed (and completed); this one gives the task its state",
        (
            "xǁTaskCoreǁstart",
            "self.step(name).state = None  # counted in forward_state below, as one of the running",
        ): "forward_state asks only whether a step is Error or Failed: None is neither, as Processing and Waiting",
        (
            "xǁTaskCoreǁstart",
            "return self.set(name, None, self.forward_state())",
        ): "the line before has given the step its state (Processing or Waiting); set leaves it so",
    },
    "seals": {
        (
            "x__mac",
            'text = json.dumps(parts, sort_keys=True, separators=(",", ":"), allow_nan=False)',
        ): "ensure_ascii=True is json.dumps' default",
        (
            "x__mac",
            'text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=None)',
        ): "json.dumps tests allow_nan for truth: None refuses NaN as False does",
        (
            "x__mac",
            'return base64.urlsafe_b64encode(digest).rstrip(b"XX=XX").decode()',
        ): "16 bytes in base64 end in A, Q, g or w before the padding: no X is ever stripped",
    },
}


# Lines no input reaches, keyed by module, then by the function's mangled name and the line as the
# source has it: every mutant of such a line survives, and says nothing of the tests.
UNREACHABLE: dict[str, dict[tuple[str, str], str]] = {
    "policy": {
        (
            "x_decide",
            'return decision("retry", "an undo\'s result no Agent of sas sealed: not taken; undoing it again")',
        ): "a CompensationFailed step is decided by _undo_failed before the ForeignResult branch is reached",
    },
}


def pytest_configure(config: object) -> None:
    """Loaded by pytest (``-p bench.mutation``) in every run mutmut makes: the model test's
    profile for mutation, read by it at import (``HYPOTHESIS_PROFILE``)."""
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        HYPOTHESIS_PROFILE,
        max_examples=MODEL_EXAMPLES,
        deadline=None,
        # No example database: a failure it saved for one mutant would be replayed for the next.
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@dataclass
class Score:
    module: str
    killed: int
    total: int
    survivors: list[tuple[str, str]]  # (mutant name, diff)
    unexplained: list[tuple[str, str]]
    other: dict[str, int]  # mutants neither caught nor survived (no tests, suspicious), by status


def _toml_table(name: str, values: dict[str, object]) -> str:
    # JSON's strings, lists, numbers and booleans are TOML's too.
    return f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def _drop_table(text: str, name: str) -> str:
    return re.sub(rf"(?ms)^\[{re.escape(name)}\]\n.*?(?=^\[|\Z)", "", text)


def _snapshot(work: Path, working_tree: bool) -> Path:
    """The files to test: a commit's (``HEAD``: one consistent state, whatever else is being edited
    beside the run) or the working tree's as they are."""
    if working_tree:
        return ROOT
    tree = work / "tree"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", "HEAD", "sas", "workflows", "activities", "supervisor", "tests", "bench", "pyproject.toml"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def prepare(work: Path, modules: Sequence[str], *, working_tree: bool = False) -> None:
    """A fresh workspace: ``sas/`` with its linked folders copied in, the tests, pyproject.toml
    with ``[tool.mutmut]`` narrowed to ``modules`` and their tests, and this driver (a plugin)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    source = _snapshot(work, working_tree)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "histories")
    shutil.copytree(source / "sas", work / "sas", symlinks=False, ignore=skip)
    shutil.copytree(source / "tests", work / "tests", ignore=skip)
    # Tests import bench's helpers; the driver and its settings are this run's own, whatever the
    # snapshot holds.
    shutil.copytree(source / "bench", work / "bench", ignore=skip, dirs_exist_ok=True)
    shutil.copy2(ROOT / "bench" / "mutation.py", work / "bench" / "mutation.py")
    settings = dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"])
    text = (source / "pyproject.toml").read_text()
    tests: list[str] = []
    for module in modules:
        tests += [t for t in MODULES[module][1] if t not in tests and (source / t).exists()]
    settings["only_mutate"] = [MODULES[m][0] for m in modules]
    settings["pytest_add_cli_args_test_selection"] = tests
    (work / "pyproject.toml").write_text(_drop_table(text, "tool.mutmut") + "\n" + _toml_table("tool.mutmut", settings))
    if source != ROOT:
        shutil.rmtree(source)


def _mutmut() -> Path:
    return Path(sys.executable).parent / "mutmut"


def run_mutmut(work: Path) -> int:
    # SAS_TEST_NO_HARD_EXIT: the suite's conftest otherwise leaves the process at the end of each
    # pytest run (tests/conftest.py), and mutmut runs pytest several times in its own process.
    env = os.environ | {
        "SAS_MODEL_SEED": MODEL_SEED,
        "HYPOTHESIS_PROFILE": HYPOTHESIS_PROFILE,
        "SAS_TEST_NO_HARD_EXIT": "1",
    }
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([str(_mutmut()), "run", "--max-children", "1"], cwd=work, env=env).returncode


@contextmanager
def _inside(work: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(before)


def mutated_line(diff: str) -> str:
    """The line a mutant changed, as the mutant has it (the key of ``EQUIVALENT``)."""
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return " / ".join(added)


def original_line(diff: str) -> str:
    """The line a mutant changed, as the source has it (the key of ``UNREACHABLE``)."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    return " / ".join(removed)


def explained(module: str, mutant: str, diff: str) -> bool:
    """Whether a survivor is listed: an equivalent mutant, or a mutant of a line no input reaches."""
    function = function_of(mutant)
    return (function, mutated_line(diff)) in EQUIVALENT.get(module, {}) or (
        function,
        original_line(diff),
    ) in UNREACHABLE.get(module, {})


def function_of(mutant: str) -> str:
    """``sas.workflows.core.requests.x__target__mutmut_3`` -> ``x__target``."""
    return mutant.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]


def scores(work: Path, modules: Sequence[str]) -> list[Score]:
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    found: list[Score] = []
    with _inside(work):
        for module in modules:
            path = MODULES[module][0]
            codes = json.loads((work / "mutants" / f"{path}.meta").read_text())["exit_code_by_key"]
            statuses = {name: status_by_exit_code[code] for name, code in codes.items()}
            survivors = [(n, get_diff_for_mutant(n, path=path)) for n, s in sorted(statuses.items()) if s == "survived"]
            unexplained = [(n, d) for n, d in survivors if not explained(module, n, d)]
            # A mutant that makes its tests loop is caught: in the suite, pytest-timeout fails them.
            caught = ("killed", "timeout")
            other: dict[str, int] = {}
            for status in statuses.values():
                if status not in (*caught, "survived"):
                    other[status] = other.get(status, 0) + 1
            killed = sum(1 for s in statuses.values() if s in caught)
            found.append(Score(module, killed, len(statuses), survivors, unexplained, other))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("modules", nargs="*", help=f"of {', '.join(MODULES)} (default: every one)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="the workspace (made afresh)")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff, explained or not")
    parser.add_argument(
        "--working-tree", action="store_true", help="test the files as they are, not HEAD's (the default)"
    )
    args = parser.parse_args(argv)
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)}: the modules are {', '.join(MODULES)}")
    started = time.monotonic()
    # Absolute: the scores are read from inside the workspace.
    args.work = args.work.resolve()
    prepare(args.work, modules, working_tree=args.working_tree)
    code = run_mutmut(args.work)
    if code != 0:
        print(f"mutmut run exited {code}", file=sys.stderr)
        return code
    unexplained = 0
    print(f"\n{'module':<10} {'killed':>6} / {'total':<6} survived (equivalent)")
    results = scores(args.work, modules)
    for s in results:
        extra = "".join(f", {n} {status}" for status, n in sorted(s.other.items()))
        print(
            f"{s.module:<10} {s.killed:>6} / {s.total:<6} {len(s.survivors)} ({len(s.survivors) - len(s.unexplained)}){extra}"
        )
    for s in results:
        shown = s.survivors if args.show else s.unexplained
        for name, diff in shown:
            print(f"\n== {name}{'' if (name, diff) in s.unexplained else ' (equivalent)'}\n{diff}")
        unexplained += len(s.unexplained) + sum(s.other.values())
    print(f"\n{time.monotonic() - started:.0f} s; workspace {args.work} (`mutmut show NAME` there)")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
