"""How workers run the workflows: in Temporal's sandbox, passing through only the data models.

The sandbox re-imports a workflow's module (and its package) for every workflow run, so that
the workflow code itself is guarded: no wall clock, random, I/O or threads, and no state left
over from another run. A module passed through is shared with the host instead, and not
guarded. So only what needs it is:

- ``task_models`` and ``supervisor.models``: the pydantic models that cross the sandbox's edge
  (workflow and activity inputs and results, signals). Passed through, they are the same
  classes in the host's data converter and in the workflow, and are not rebuilt per run.
- ``task_types`` and ``api``: the declarations a task type is made of (frozen data: steps,
  services, calls declared as data) and the public API a team's task type module imports them
  from. The team's module itself is not passed through: it is re-imported, and guarded, per run.
- pydantic, pydantic_core and annotated_types, the stdlib and temporalio are already in
  Temporal's default passthrough list.

``workflows`` and ``supervisor`` themselves are not passed through: a module of theirs that
defines a workflow class (the clean-up's, the Supervisor's) is re-imported per run. A task
type's module is re-imported per run as well, but its class is not made again: ``task_workflow``
keeps the class it made for an equal definition, since applying ``@workflow.defn`` to a
``TaskScheduler`` subclass was most of the CPU of a run's start (docs/benchmarks.md).

The runner is Temporal's own, with two differences in how the host calls into a run's sandbox
(what runs in the sandbox, and how it is guarded, is unchanged):

- The SDK enters the sandbox by ``exec`` of a few fixed source strings, compiling them again on
  every call. Here each string is compiled once per process and its code object executed.
- The data converter asks the run, three or four times for every payload of an activation and of
  its completion, which serialization and external-storage context applies. The SDK answers each
  question by entering the sandbox (exec, then swapping ``sys.modules``, ``__import__`` and every
  restricted builtin for the call's duration), although the answer is read from the run's own
  bookkeeping (its pending activities, its info) and needs none of that. Here it is asked directly.

Together they cost a worker about a tenth of its CPU (docs/benchmarks.md, section 1).
"""

from __future__ import annotations

from types import CodeType
from typing import TYPE_CHECKING, Any, cast

from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

if TYPE_CHECKING:
    # Only for the signatures: the SDK calls these two methods only in versions that have them.
    from temporalio.converter import SerializationContext
    from temporalio.converter._extstore import StorageDriverStoreContext
    from temporalio.worker._command_aware_visitor import CommandInfo

PASSED_THROUGH = ("sas.task_models", "sas.task_types", "sas.api", "sas.supervisor.models")

# Source string -> code object. The SDK passes a handful of fixed strings (one per kind of entry,
# and one import line per workflow class), so this stays as small as the set of workflow classes.
_COMPILED: dict[str, CodeType] = {}


def _compiled(code: str) -> CodeType:
    found = _COMPILED.get(code)
    if found is None:
        # The same file name as the SDK's exec of the string, so tracebacks read the same.
        found = _COMPILED[code] = compile(code, "<string>", "exec")
    return found


class _Instance(sandbox_runner._Instance):
    """The SDK's sandboxed instance, executing its entry strings from compiled code objects and
    answering the data converter's context questions without entering the sandbox."""

    def _run_code(self, code: str, **extra_globals: Any) -> None:
        # exec() takes a code object as readily as a string; the SDK only ever hands it one.
        super()._run_code(_compiled(code), **extra_globals)  # type: ignore[arg-type]

    def _sandboxed_run(self) -> Any:
        """The run's object inside the sandbox (the SDK's ``InSandbox``), once it exists."""
        return cast(dict[str, Any], self.globals_and_locals).get("__temporal_in_sandbox")

    def get_serialization_context(self, command_info: CommandInfo | None) -> SerializationContext | None:
        # The SDK's own answer (_WorkflowInstanceImpl.get_serialization_context): dataclasses built
        # from the run's info and pending commands; it imports nothing and calls no guarded builtin.
        run = self._sandboxed_run()
        if run is None:  # not created yet: the SDK's way
            return super().get_serialization_context(command_info)
        return cast("SerializationContext | None", run.get_serialization_context(command_info))

    def get_external_store_context(self, command_info: CommandInfo | None) -> StorageDriverStoreContext:
        run = self._sandboxed_run()
        if run is None:
            return super().get_external_store_context(command_info)
        return cast("StorageDriverStoreContext", run.get_external_store_context(command_info))


class SandboxRunner(SandboxedWorkflowRunner):
    """Temporal's sandboxed runner, entered more cheaply by the host (see above)."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Instance(det, self.runner_class, self.restrictions)


def _sdk_fits() -> bool:
    """Whether the installed SDK's sandbox instance still has the methods ``_Instance`` overrides,
    with the calls it makes; they are private, so a release that reshapes them is met by the
    SDK's own runner instead of a broken one."""
    base = getattr(sandbox_runner, "_Instance", None)
    return base is not None and all(
        callable(getattr(base, name, None))
        for name in ("_run_code", "get_serialization_context", "get_external_store_context")
    )


def workflow_runner() -> SandboxedWorkflowRunner:
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    runner = SandboxRunner if _sdk_fits() else SandboxedWorkflowRunner
    return runner(restrictions=restrictions)
