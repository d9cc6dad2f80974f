"""What each process runs and reports: which queues a worker polls, which task types, schedules,
metrics and traces."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from sas.task_models.ids import NAME, SCOPED_NAME


class ScheduleSettings(BaseModel):
    """Bounds of ``sas schedule create``: each run of a schedule is a real task (a real charge)."""

    min_interval_s: int = Field(
        default=60,
        ge=1,
        le=86_400,
        description="Shortest --every a schedule may have, in seconds (cron's own finest step is a minute).",
    )


WORKFLOW_QUEUE = "workflows"


class WorkerSettings(BaseModel):
    """Which task queues a worker process polls (``SAS_WORKER__QUEUES='["payment"]'``), so that
    each service's workers can be deployed and scaled on their own (docs/operator.md)."""

    queues: list[str] | None = Field(
        default=None,
        description="'workflows' (the Scheduler's queue: workflows, the mirror, callbacks) and/or service names,"
        " each meaning that service's own queue; all of them if unset. A service no Agent calls stops the worker.",
    )
    deployment_name: str | None = Field(
        default=None,
        max_length=200,
        description="Worker Versioning: the Worker Deployment of this process (with build_id; unset: unversioned)."
        " Task and Supervisor workers of one release share it (docs/operator.md, deploying new workflow code).",
    )
    build_id: str | None = Field(
        default=None,
        max_length=200,
        description="Worker Versioning: this build's id (an image tag, a git commit); a task stays on the build it"
        " started on, the Supervisor moves to the current one.",
    )

    compact_plans: bool | None = Field(
        default=None,
        description="Whether the accept records each task's plan compactly in its history (only what the worker"
        " decided), and its calls leave out the names Temporal gives their Agent's worker (the task id, type, chain"
        " and keys): about 1 kB less per order. A worker of a release before compact plans cannot replay such a"
        " history (its workflow task fails and retries, the task untouched), so unset means: on with Worker"
        " Versioning, where a task is replayed by its own build only; off unversioned, where turning it on waits"
        " until no older worker runs or will be rolled back to.",
    )

    @property
    def writes_compact_plans(self) -> bool:
        """Whether this worker's accepts record compact plans (``compact_plans``, else versioned)."""
        return self.compact_plans if self.compact_plans is not None else self.deployment_name is not None

    @model_validator(mode="after")
    def _deployment_and_build(self) -> WorkerSettings:
        if (self.deployment_name is None) != (self.build_id is None):
            raise ValueError("set both SAS_WORKER__DEPLOYMENT_NAME and SAS_WORKER__BUILD_ID, or neither")
        return self

    @field_validator("queues")
    @classmethod
    def _known_form(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("name at least one queue ('workflows' or a service), or leave it unset for all")
        for name in value:
            if name != WORKFLOW_QUEUE and not SCOPED_NAME.fullmatch(name):
                raise ValueError(f"{name!r}: use 'workflows' or a service's name (a team's: north.flights)")
        return list(dict.fromkeys(value))


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class TaskTypeSettings(BaseModel):
    """Where sas finds task types besides the installed packages' ``sas.task_types`` entry points."""

    modules: list[str] = Field(
        default_factory=list,
        description="Modules that declare task types, for code that is not installed as a package:"
        " comma-separated (SAS_TASK_TYPES__MODULES=my_team.trip,my_team.refund) or a JSON list."
        " Each must be importable (on PYTHONPATH) by every process: worker, Supervisor and sas.",
    )

    run: list[str] = Field(
        default_factory=list,
        description="The task types this process runs, comma-separated (SAS_TASK_TYPES__RUN=trip,ticketed_trip);"
        " a team's by their scoped names (north.booking), or all of one team's as <team>.* (north.*);"
        " empty: every registered one. A worker that runs some registers only their workflows and Agents, and"
        " another team's package that cannot be imported, or declares a broken type, does not stop it.",
    )

    @field_validator("modules", "run", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("modules")
    @classmethod
    def _module_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _MODULE_NAME.match(name):
                raise ValueError(f"{name!r} is not a module name (e.g. my_team.trip)")
        return list(dict.fromkeys(value))

    @field_validator("run")
    @classmethod
    def _type_names(cls, value: list[str]) -> list[str]:
        for name in value:
            team = name.removesuffix(".*")
            if not (SCOPED_NAME.fullmatch(name) or (team != name and NAME.fullmatch(team))):
                raise ValueError(
                    f"{name!r} is not a task type name (1-40 of a-z 0-9 _, starting with a letter; a team's"
                    " north.booking) nor a team's types (north.*)"
                )
        return list(dict.fromkeys(value))


class MetricsSettings(BaseModel):
    """Prometheus endpoints (host:port). Each serves the Temporal SDK's series and sas's own."""

    worker_bind: str | None = Field(default=None, description="e.g. 0.0.0.0:9464; unset = no endpoint.")
    supervisor_bind: str | None = Field(default=None, description="e.g. 0.0.0.0:9465; unset = no endpoint.")


class OtelSettings(BaseModel):
    """OpenTelemetry traces of the worker (the ``otel`` extra): where they go is OTEL_EXPORTER_OTLP_*."""

    enabled: bool = Field(
        default=False,
        description="Trace each task's workflow, its Agents and their HTTP calls; needs pip install 'sas[otel]'.",
    )
