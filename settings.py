"""Every setting sas reads, in one place.

Values come from environment variables prefixed ``SAS_`` (nested groups use a
double underscore: ``SAS_TEMPORAL__ADDRESS``), then from a ``.env`` file in the
working directory, then from the defaults below. Processes read them once at
start-up through :func:`get_settings` and pass what they need down; workflow
code never reads settings (that would not be deterministic) - the values it
needs arrive recorded in its history (see ``activities/mirror.py``).
"""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from task_models.steps import StepPolicyValues as StepPolicy


class TemporalTLS(BaseModel):
    """TLS / mTLS towards the Temporal frontend (self-hosted cluster or Temporal Cloud)."""

    enabled: bool = False
    server_root_ca_path: str | None = Field(
        default=None, description="PEM bundle that signs the server certificate; system roots if unset."
    )
    client_cert_path: str | None = Field(default=None, description="PEM client certificate, for mTLS.")
    client_key_path: str | None = Field(default=None, description="PEM client private key, for mTLS.")
    server_name: str | None = Field(default=None, description="Override the TLS server name (SNI).")

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> TemporalTLS:
        if bool(self.client_cert_path) != bool(self.client_key_path):
            raise ValueError("client_cert_path and client_key_path must be set together (mTLS needs both)")
        return self


class TemporalSettings(BaseModel):
    address: str = Field(default="localhost:7233", description="host:port of the Temporal frontend.")
    namespace: str = "default"
    task_queue: str = Field(default="sas-tasks", description="Queue of the Scheduler workflows and their Agents.")
    supervisor_task_queue: str = Field(default="sas-supervisor", description="Queue of the Supervisor.")
    identity: str | None = Field(default=None, description="Client/worker identity; pid@host if unset.")
    api_key: SecretStr | None = Field(default=None, description="API key (Temporal Cloud).")
    tls: TemporalTLS = TemporalTLS()

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {value!r}")
        return value


class DatabaseSettings(BaseModel):
    url: str = Field(
        default="sqlite+aiosqlite:///./.sas/state.db",
        description="SQLAlchemy async URL of the state store (sqlite+aiosqlite or postgresql+asyncpg).",
    )
    pool_size: int = Field(default=5, ge=1, description="PostgreSQL connections kept open per process.")
    max_overflow: int = Field(default=10, ge=0, description="Extra PostgreSQL connections under load.")
    pool_timeout_s: float = Field(default=30.0, gt=0)
    echo: bool = False

    @field_validator("url")
    @classmethod
    def _supported_driver(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "must start with sqlite+aiosqlite:// or postgresql+asyncpg:// "
                f"(got {value.split('://')[0]!r})"
            )
        return value


class ServicesSettings(BaseModel):
    url: str = Field(default="http://127.0.0.1:8081", description="Base URL of the remote services.")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, got {value!r}")
        return value.rstrip("/")


class SupervisorSettings(BaseModel):
    interval_s: float = Field(default=5.0, gt=0, description="Time between sweeps.")
    failure_threshold: int = Field(
        default=3, ge=1, description="FailureCount at which the Supervisor stops retrying and compensates."
    )
    overdue_grace_s: float = Field(
        default=3.0, ge=0, description="How long past CompleteBy a Processing step may be before it counts."
    )
    batch_size: int = Field(default=100, ge=1, description="Most due steps handled per sweep.")
    sweeps_per_run: int = Field(default=200, ge=1, description="Sweeps before continue-as-new.")
    workflow_id: str = Field(default="sas-supervisor", description="Fixed id: Temporal runs one at a time.")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SAS_", env_nested_delimiter="__", env_file=".env", extra="ignore"
    )

    temporal: TemporalSettings = TemporalSettings()
    database: DatabaseSettings = DatabaseSettings()
    services: ServicesSettings = ServicesSettings()
    supervisor: SupervisorSettings = SupervisorSettings()
    steps: dict[str, StepPolicy] = Field(
        default_factory=dict,
        description="Per-step overrides, keyed by step name: SAS_STEPS__CHARGE__COMPLETE_BY_S=20.",
    )
    default_step: StepPolicy = StepPolicy()
    compensation: StepPolicy = Field(
        default=StepPolicy(max_attempts=5),
        description="How each compensation (undo) runs before it is reported as CompensationFailed.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    state_dir: str = Field(default="./.sas", description="Where sas demo keeps its files.")

    def step_policy(self, step: str) -> StepPolicy:
        return self.steps.get(step, self.default_step)


@functools.cache
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
