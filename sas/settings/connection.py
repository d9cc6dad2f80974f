"""Where every process connects: the Temporal cluster (and its TLS) and the state store."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator


class TemporalTLS(BaseModel):
    """TLS / mTLS towards the Temporal frontend (self-hosted cluster or Temporal Cloud)."""

    enabled: bool = Field(default=False, description="TLS to the frontend (an API key turns it on without this).")
    server_root_ca_path: str | None = Field(
        default=None, description="PEM bundle that signs the server certificate; system roots if unset."
    )
    client_cert_path: str | None = Field(default=None, description="PEM client certificate, for mTLS.")
    client_key_path: str | None = Field(default=None, description="PEM client private key, for mTLS.")
    server_name: str | None = Field(default=None, description="Override the TLS server name (SNI).")

    @field_validator("server_root_ca_path", "client_cert_path", "client_key_path")
    @classmethod
    def _readable_pem(cls, value: str | None) -> str | None:
        # Checked at start-up, so a typo in a path is a clear message, not a failed connection.
        if value is None:
            return None
        try:
            with open(Path(value).expanduser(), "rb") as f:
                head = f.read(4096)
        except OSError as err:
            raise ValueError(f"cannot read {value!r}: {err.strerror}") from None
        if b"-----BEGIN " not in head:
            raise ValueError(f"{value!r} is not a PEM file")
        return value

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> TemporalTLS:
        if bool(self.client_cert_path) != bool(self.client_key_path):
            raise ValueError("client_cert_path and client_key_path must be set together (mTLS needs both)")
        return self


class TemporalSettings(BaseModel):
    """The Temporal cluster every process talks to: a dev server, a self-hosted cluster or Temporal Cloud."""

    address: str = Field(default="localhost:7233", description="host:port of the Temporal frontend.")
    namespace: str = Field(default="default", description="Namespace of the task workflows and the Supervisor.")
    task_queue: str = Field(
        default="sas-tasks",
        description="Queue of the Scheduler workflows and of the Agents of every service without a queue of its"
        " own; a service with one (SAS_SERVICES__<NAME>__OWN_QUEUE) has <task_queue>.<service> (sas-tasks.payment).",
    )
    supervisor_task_queue: str = Field(default="sas-supervisor", description="Queue of the Supervisor.")
    identity: str | None = Field(
        default=None, description="Client/worker identity (the LockedBy value); <role>-<pid>@<host> if unset."
    )
    api_key: SecretStr | None = Field(default=None, description="API key (Temporal Cloud); turns on TLS.")
    tls: TemporalTLS = TemporalTLS()

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {value!r}")
        return value


class DatabaseSettings(BaseModel):
    """The state store: SQLite by default, PostgreSQL to scale."""

    url: str = Field(
        default="sqlite+aiosqlite:///./.sas/state.db",
        description="SQLAlchemy async URL of the state store: sqlite+aiosqlite:///<path>, or"
        " postgresql+asyncpg://user:pass@host/db to scale (TLS with ?ssl=require, or ?ssl=verify-full"
        " with PGSSLROOTCERT naming the CA bundle).",
    )
    pool_size: int = Field(default=5, ge=1, description="PostgreSQL connections kept open per process.")
    max_overflow: int = Field(default=10, ge=0, description="Extra PostgreSQL connections under load.")
    pool_timeout_s: float = Field(
        default=30.0, gt=0, description="Longest wait for a PostgreSQL connection of the pool."
    )
    echo: bool = Field(default=False, description="Log every SQL statement (SQLAlchemy's echo), for debugging.")

    @field_validator("url")
    @classmethod
    def _supported_driver(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                f"must start with sqlite+aiosqlite:// or postgresql+asyncpg:// (got {value.split('://')[0]!r})"
            )
        return value


# An HTTP header name (RFC 9110 token): anything else would be refused by httpx at the first call.
