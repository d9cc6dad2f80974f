"""All the settings as one model, ``Settings``, and how they are read: the environment, then a
``.env`` file, then the defaults; ``get_settings`` reads them once per process."""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from sas.settings.connection import DatabaseSettings, TemporalSettings
from sas.settings.operator import OperatorSettings
from sas.settings.processes import (
    MetricsSettings,
    OtelSettings,
    ScheduleSettings,
    TaskTypeSettings,
    WorkerSettings,
)
from sas.settings.security import CallbackSettings, CodecServerSettings, EncryptionSettings, SealSettings
from sas.settings.services import ServicesSettings
from sas.settings.supervisor import SupervisorSettings
from sas.settings.teams import TeamSettings, check_team_names, team_overrides
from sas.task_models.outbound import OutboundPolicy, OutboundRefused, check_url
from sas.task_models.plans import StepPolicyValues as StepPolicy


class _EnvSource(EnvSettingsSource):
    """The environment, with a group or map whose variable is not JSON left as text: it then fails
    validation with its field's location, and is reported naming the variable, like any bad value
    (pydantic-settings' own SettingsError says only which field, in a sentence)."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            return value


class _DotEnvSource(DotEnvSettingsSource):
    """The ``.env`` file, read the same way as the environment."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            return value


_POLICY_FIELDS = frozenset(StepPolicy.model_fields)


def steps_by_key(value: Any) -> Any:
    """``SAS_STEPS__*`` as one map: each key a step (``charge``: its policy's fields) or a task type
    (``order``: its steps' policies, each kept as ``order.charge``). A key may be both; what is
    neither (a misspelt field) is left for the policy's own validation to name."""
    if not isinstance(value, dict):
        return value
    found: dict[str, Any] = {}
    for key, entry in value.items():
        if not isinstance(entry, dict):
            found[key] = entry
            continue
        fields = {k: v for k, v in entry.items() if k in _POLICY_FIELDS or not isinstance(v, dict | BaseModel)}
        if fields:
            found[key] = fields
        for step, policy in entry.items():
            if step not in fields:
                found[f"{key}.{step}"] = policy
    return found


class Settings(BaseSettings):
    """Every setting: the environment variable ``SAS_<FIELD>``, nested groups joined by ``__``.

    A ``.env`` file in the working directory is read too; the environment wins. An invalid value
    stops the process at start-up with a message naming the variable."""

    model_config = SettingsConfigDict(
        env_prefix="SAS_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        # A rejected value may be a password (a database URL) or a key: never echo it.
        hide_input_in_errors=True,
    )

    temporal: TemporalSettings = TemporalSettings()
    database: DatabaseSettings = DatabaseSettings()
    services: ServicesSettings = ServicesSettings()
    supervisor: SupervisorSettings = SupervisorSettings()
    callbacks: CallbackSettings = CallbackSettings()
    metrics: MetricsSettings = MetricsSettings()
    worker: WorkerSettings = WorkerSettings()
    task_types: TaskTypeSettings = TaskTypeSettings()
    otel: OtelSettings = OtelSettings()
    encryption: EncryptionSettings = EncryptionSettings()
    seal: SealSettings = SealSettings()
    outbound: OutboundPolicy = Field(default_factory=OutboundPolicy)
    codec_server: CodecServerSettings = CodecServerSettings()
    schedules: ScheduleSettings = ScheduleSettings()
    operator: OperatorSettings = OperatorSettings()
    steps: dict[str, StepPolicy] = Field(
        default_factory=dict,
        description="Per-step overrides: of one task type's step, SAS_STEPS__ORDER__CHARGE__COMPLETE_BY_S=20"
        " (kept as the key order.charge); or of every step of that name, whatever its type,"
        " SAS_STEPS__CHARGE__COMPLETE_BY_S=20. A task type's own wins.",
    )
    default_step: StepPolicy = Field(
        default=StepPolicy(),
        description="How a step runs when neither SAS_STEPS__<TYPE>__<STEP>__*, SAS_STEPS__<STEP>__* nor its"
        " declaration says.",
    )
    compensation: StepPolicy = Field(
        default=StepPolicy(max_attempts=5),
        description="How each compensation (undo) runs before it is reported as CompensationFailed.",
    )
    teams: dict[str, TeamSettings] = Field(
        default_factory=dict,
        description="Per team, for the team a task type or service names (team=...): its share"
        " (SAS_TEAMS__PAYMENTS__WEIGHT=3), its webhook, and its own services', steps' and ladders' settings"
        " (SAS_TEAMS__NORTH__SERVICES__FLIGHTS__URL).",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Least level logged; logs are JSON lines on stderr."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env_file = dotenv_settings.env_file if isinstance(dotenv_settings, DotEnvSettingsSource) else ".env"
        return (
            init_settings,
            _EnvSource(settings_cls),
            _DotEnvSource(settings_cls, env_file=env_file),
            file_secret_settings,
        )

    @model_validator(mode="after")
    def _webhook_allowed(self) -> Settings:
        # Checked at start-up (names are resolved again at each delivery, see activities/outbound.py).
        url = self.supervisor.webhook.url
        if url:
            try:
                check_url(url, self.outbound)
            except OutboundRefused as err:
                raise ValueError(f"SAS_SUPERVISOR__WEBHOOK__URL refused: {err}") from None
        return self

    @model_validator(mode="after")
    def _team_settings(self) -> Settings:
        # A team's own settings are found where every other one's are, under their scoped names
        # (north.flights, north.booking.flight): each reader keeps one way to look them up. The
        # groups are copied: the settings given stay as they were.
        own = team_overrides(self.teams)
        if own.services:
            services = self.services.model_copy(deep=True)
            services.__pydantic_extra__ = {**(services.__pydantic_extra__ or {}), **own.services}
            object.__setattr__(self, "services", services)
        if own.steps:
            object.__setattr__(self, "steps", {**self.steps, **own.steps})
        if own.ladders:
            ladders = {**self.supervisor.ladders, **own.ladders}
            object.__setattr__(self, "supervisor", self.supervisor.model_copy(update={"ladders": ladders}))
        return self

    @field_validator("teams", mode="before")
    @classmethod
    def _team_names(cls, value: Any) -> Any:
        return check_team_names(value)

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_of_a_type(cls, value: Any) -> Any:
        return steps_by_key(value)

    def step_override(self, task_type: str, step: str) -> StepPolicy | None:
        """The step's policy set for its task type (``SAS_STEPS__<TYPE>__<STEP>__*``), else for
        every step of its name (``SAS_STEPS__<STEP>__*``); None if neither is set."""
        return self.steps.get(f"{task_type}.{step}") or self.steps.get(step)


@functools.cache
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
