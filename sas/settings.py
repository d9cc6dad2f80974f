"""Every setting sas reads, in one place.

Values come from environment variables prefixed ``SAS_`` (nested groups use a
double underscore: ``SAS_TEMPORAL__ADDRESS``), then from a ``.env`` file in the
working directory, then from the defaults below. Processes read them once at
start-up through :func:`get_settings` and pass what they need down; workflow
code never reads settings (that would not be deterministic) - the values it
needs arrive recorded in its history (see ``activities/mirror.py``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import zlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from sas.breaker.settings import BreakerSettings as BreakerSettings
from sas.task_models.ladder import Ladder
from sas.task_models.outbound import OutboundPolicy, OutboundRefused, check_url
from sas.task_models.steps import StepPolicyValues as StepPolicy


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
        description="Queue of the Scheduler workflows; each service's Agents run on its own queue,"
        " <task_queue>.<service> (sas-tasks.payment).",
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
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# A service's name is the first part of its Agents' activity names (``shipping.ship``).
_SERVICE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class ServiceSettings(BaseModel):
    """One remote service: ``SAS_SERVICES__<NAME>__URL`` etc. Unset fields fall back to the group's.
    A name that no registered task type's Agents call stops the worker.

    Each service is a bulkhead: its own connection pool and its own limit on calls in flight, so
    a service that hangs holds only its own slots and the other services' calls go on.
    """

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected token is not printed

    url: str | None = Field(default=None, description="Base URL of this service; SAS_SERVICES__URL if unset.")
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3_600,
        description="httpx timeout of one call (connect, read, write, pool); the step's complete-by cuts it shorter.",
    )
    max_connections: int | None = Field(
        default=None, ge=1, le=10_000, description="This service's own pool; SAS_SERVICES__MAX_CONNECTIONS if unset."
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Calls to this service in flight per worker; more wait (heartbeating) until complete-by."
        " max_connections if unset.",
    )
    auth_header: str = Field(default="Authorization", description="Header that carries auth_token.")
    auth_token: SecretStr | None = Field(
        default=None, description="Sent as-is in auth_header on every call (e.g. 'Bearer ...'); none if unset."
    )
    max_per_second: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="Temporal's rate limit on the service's task queue (activities started per second, over"
        " every worker: max_task_queue_activities_per_second); none if unset.",
    )
    pollers: int = Field(default=5, ge=1, le=100, description="Pollers each worker runs on the service's task queue.")
    breaker: BreakerSettings = BreakerSettings()

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value)

    @field_validator("auth_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not _HEADER_NAME.match(value):
            raise ValueError(f"not an HTTP header name: {value!r}")
        return value


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    return value.rstrip("/")


class ServicesSettings(BaseModel):
    """The remote services. The plain fields are the defaults; each service named by its Agents may
    override them under its own name: ``SAS_SERVICES__PAYMENT__URL``, ``SAS_SERVICES__PAYMENT__MAX_CONCURRENCY``."""

    url: str = Field(default="http://127.0.0.1:8081", description="Base URL of every service without one of its own.")
    max_connections: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="HTTP connections a worker keeps open to each remote service. All are kept alive between calls,"
        " so a busy worker does not reconnect; about its number of concurrent activities is right.",
    )
    admin_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of the built-in services' /admin API (fault injection, reset): the services"
        " require it and their callers (sas demo, tests, benchmarks) send it. The API exists only when the services"
        " run with --enable-faults (sas services serve --enable-faults, sas up --enable-faults, sas demo; or"
        " SAS_SERVICES_ENABLE_FAULTS=1), which"
        " they refuse without a token (sas demo and sas up make one in .sas/admin-token).",
    )
    # Every other key names a service: SAS_SERVICES__SHIPPING__URL arrives as {"shipping": {"url": ...}}
    # and is validated as a ServiceSettings, with errors located at SAS_SERVICES__SHIPPING__<FIELD>.
    # Names are checked against the Agents' services when the worker builds them
    # (activities.build_activities): settings do not know which services exist.
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, ServiceSettings] = Field(init=False)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        return _http_url(value)

    @model_validator(mode="after")
    def _names(self) -> ServicesSettings:
        for name in self.named:
            if not _SERVICE_NAME.match(name):
                raise ValueError(f"service name {name!r}: use 1-40 lowercase letters, digits or '_'")
        return self

    @property
    def named(self) -> dict[str, ServiceSettings]:
        """The services given settings of their own, by name."""
        return dict(self.__pydantic_extra__ or {})

    def service(self, name: str) -> ResolvedService:
        """The settings of service ``name``, with the group's defaults filled in."""
        own = self.named.get(name, ServiceSettings())
        connections = own.max_connections or self.max_connections
        return ResolvedService(
            name=name,
            url=own.url or self.url,
            timeout_s=own.timeout_s,
            max_connections=connections,
            max_concurrency=own.max_concurrency or connections,
            auth_header=own.auth_header,
            auth_token=own.auth_token,
            max_per_second=own.max_per_second,
            pollers=own.pollers,
            breaker=own.breaker,
        )


class ResolvedService(BaseModel):
    """One service's settings as a worker uses them: nothing left unset."""

    model_config = ConfigDict(frozen=True)

    name: str
    url: str
    timeout_s: float
    max_connections: int
    max_concurrency: int
    auth_header: str
    auth_token: SecretStr | None
    max_per_second: float | None = None
    pollers: int = 5
    breaker: BreakerSettings = BreakerSettings()


class TaskLadder(Ladder):
    """A task type's ladder, with optional per-step overrides: SAS_SUPERVISOR__LADDERS__ORDER__STEPS__SHIP__RETRIES=5.
    A field left unset is the task type's, else the default ladder's."""

    steps: dict[str, Ladder] = Field(
        default_factory=dict,
        description="Per-step overrides within the task type, keyed by step name; a field left unset is the task type's.",
    )


_SECRET_PREFIX = "whsec_"
_NEW_SECRET = "python -c \"import base64,os; print('whsec_' + base64.b64encode(os.urandom(32)).decode())\""


def _standard_webhooks_secret(value: SecretStr | None) -> SecretStr | None:
    """A Standard Webhooks signing secret: ``whsec_`` and the base64 of 24 to 64 random bytes."""
    if value is None:
        return None
    raw = value.get_secret_value()
    # Never echo the value: a near-miss of a secret is still most of a secret.
    if not raw.startswith(_SECRET_PREFIX):
        raise ValueError(f"must be a Standard Webhooks secret, whsec_<base64>; make one with: {_NEW_SECRET}")
    try:
        key = base64.b64decode(raw[len(_SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the part after whsec_ is not valid base64; make one with: {_NEW_SECRET}") from None
    if not 24 <= len(key) <= 64:
        raise ValueError(f"the key decodes to {len(key)} bytes; use 24 to 64 random bytes ({_NEW_SECRET})")
    return value


class WebhookSettings(BaseModel):
    """The alert webhook: every new or escalated alert as a signed JSON POST (docs/webhooks.md)."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected secret is not printed

    url: str | None = Field(
        default=None,
        description="POST every new or escalated alert here as JSON; off if unset. Checked against SAS_OUTBOUND__*.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="Standard Webhooks secret (whsec_<base64>): signs each delivery (webhook-signature).",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Timeout of one delivery.")
    max_attempts: int = Field(default=8, ge=1, description="Deliveries tried per alert before it is given up (logged).")
    retry_delay_s: float = Field(default=2.0, gt=0, description="First wait between deliveries; doubles each time.")

    _secret_form = field_validator("secret")(_standard_webhooks_secret)


class SupervisorSettings(Ladder):
    """The Supervisor: its sweeps, the default escalation ladder (the ``Ladder`` fields) and what it watches.

    The default ladder retries after 1 s and 2 s (FailureCount 1 and 2), makes three cool-down
    tries 5 minutes apart (3 to 5), which waits out a 10-minute outage of a remote service, then
    compensates at FailureCount 6; a permanent fault goes straight to the outcome."""

    interval_s: float = Field(default=5.0, gt=0, description="Time between sweeps while there is work.")
    max_interval_s: float = Field(
        default=60.0, gt=0, description="Idle sweeps back off towards this; a failure (wake signal) or work resets it."
    )
    idle_backoff: float = Field(default=2.0, ge=1.0, description="Factor the interval grows by after an empty sweep.")
    failure_threshold: int = Field(
        default=3, ge=1, description="FailureCount at which the default ladder acts (retries = threshold - 1)."
    )
    ladders: dict[str, TaskLadder] = Field(
        default_factory=dict,
        description="Per task type (and step) ladders: SAS_SUPERVISOR__LADDERS__ORDER__COOLDOWN_S=30.",
    )
    overdue_grace_s: float = Field(
        default=3.0, ge=0, description="How long past CompleteBy a Processing step may be before it counts."
    )
    batch_size: int = Field(default=100, ge=1, description="Most due steps handled per sweep.")
    sweeps_per_run: int = Field(default=200, ge=1, description="Sweeps before continue-as-new.")
    workflow_id: str = Field(
        default="sas-supervisor",
        description="Fixed id: Temporal runs one at a time (per shard; -<shard> is appended when sharded).",
    )
    shards: int = Field(
        default=1, ge=1, le=4096, description="S: Supervisor workflows, each owning a hash range of task ids."
    )
    keep_running_s: float = Field(
        default=15.0,
        gt=0,
        le=3600,
        description="How often each Supervisor worker checks that every shard's Supervisor workflow runs,"
        " and starts a closed one again.",
    )
    sweep_bound_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="`sas health supervisor` fails when a shard has not swept for this long;"
        " max_interval_s + 90 s if unset (a sweep's own time and a slow round trip).",
    )
    orphan_after_s: float = Field(
        default=30.0,
        ge=0,
        description="A non-terminal task untouched this long is checked against Temporal (detection d).",
    )
    orphan_batch: int = Field(default=50, ge=1, description="Most tasks checked against Temporal per check.")
    orphan_check_s: float = Field(default=15.0, ge=0, description="How often tasks are checked against Temporal (d).")
    queue_check_s: float = Field(
        default=15.0, ge=0, description="How often task queues are asked for pollers and backlog (detection c)."
    )
    queue_idle_after_s: float = Field(
        default=10.0, ge=0, description="A Pending/Processing step this old on a queue with no poller raises an alert."
    )
    poller_stale_s: float = Field(
        default=120.0,
        gt=0,
        description="A poller Temporal last saw longer ago than this is gone (workers long-poll for up to ~60 s,"
        " so keep it well above that).",
    )
    concurrency: int = Field(
        default=16,
        ge=1,
        le=256,
        description="Decisions a sweep carries out at once (each asks Temporal, claims its row, sends its signal).",
    )
    incident_min_tasks: int = Field(
        default=5,
        ge=2,
        description="Tasks failing for one cause (service, step, error) that make one incident, their alerts folded in.",
    )
    webhook: WebhookSettings = WebhookSettings()

    def shard_workflow_id(self, shard: int) -> str:
        """One Supervisor workflow id per shard; the plain id when there is one shard."""
        return self.workflow_id if self.shards == 1 else f"{self.workflow_id}-{shard}"

    def workflow_id_for_task(self, task_id: str) -> str:
        """The Supervisor workflow that owns ``task_id`` (the one its Scheduler wakes)."""
        bucket = zlib.crc32(task_id.encode()) % 4096  # = state_store.tables.shard_of
        return self.shard_workflow_id(self.shard_for_bucket(bucket))

    def shard_for_bucket(self, bucket: int, buckets: int = 4096) -> int:
        """The shard owning a task's hash bucket (``state_store.tables.shard_of``): contiguous ranges."""
        return bucket * self.shards // buckets

    def bucket_range(self, shard: int, buckets: int = 4096) -> tuple[int, int]:
        """[lo, hi) of the hash buckets shard ``shard`` scans."""
        lo = -(-shard * buckets // self.shards)
        hi = -(-(shard + 1) * buckets // self.shards)
        return lo, hi

    def ladder_for(self, task_type: str, step: str) -> Ladder:
        """The resolved ladder of one step: per-step override, else task type, else the defaults above."""
        defaults = self.resolved()
        if "retries" not in self.model_fields_set:
            defaults = defaults.model_copy(update={"retries": self.failure_threshold - 1})
        task = self.ladders.get(task_type)
        return defaults.overlaid(task, task.steps.get(step) if task else None)


class EncryptionSettings(BaseModel):
    """Payload encryption (AES-256-GCM) of what sas writes into Temporal's history; see docs/security.md.

    ``SAS_ENCRYPTION__KEYS='{"k2": "<base64>", "k1": "<base64>"}'`` and ``SAS_ENCRYPTION__CURRENT_KEY_ID=k2``.
    """

    keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Key id -> base64 of a 32-byte key. Keep retired keys here while histories use them.",
    )
    current_key_id: str | None = Field(
        default=None, description="Key that encrypts new payloads; unset = write plaintext (known keys still decrypt)."
    )

    @model_validator(mode="before")
    @classmethod
    def _hide_keys_first(cls, data: Any) -> Any:
        # pydantic prints a rejected field's input in its error; wrapping the raw strings in
        # SecretStr before any check runs means a bad key is shown as '**********'.
        if isinstance(data, dict) and isinstance(data.get("keys"), dict):
            data = {**data, "keys": {k: SecretStr(v) if isinstance(v, str) else v for k, v in data["keys"].items()}}
        return data

    @field_validator("keys")
    @classmethod
    def _aes256_keys(cls, keys: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for key_id, secret in keys.items():
            # The id travels in clear in every payload's metadata: keep it short and boring.
            if not (0 < len(key_id) <= 64 and key_id.isascii() and all(c.isalnum() or c in "._-" for c in key_id)):
                raise ValueError(f"key id {key_id!r}: use 1-64 letters, digits, '.', '_' or '-'")
            try:
                raw = base64.b64decode(secret.get_secret_value(), validate=True)
            except (binascii.Error, ValueError):
                # Never echo the value: a near-miss of a key is still most of a key.
                raise ValueError(f"key {key_id!r} is not valid base64") from None
            if len(raw) != 32:
                raise ValueError(f"key {key_id!r} decodes to {len(raw)} bytes; AES-256 needs exactly 32")
        return keys

    @field_validator("current_key_id")
    @classmethod
    def _current_key_is_known(cls, key_id: str | None, info: ValidationInfo) -> str | None:
        # A field check, not a model one: a model-level error would carry the raw key strings.
        keys = info.data.get("keys")
        if key_id is not None and keys is not None and key_id not in keys:
            known = ", ".join(sorted(keys)) or "none configured"
            raise ValueError(f"{key_id!r} is not one of the keys ({known})")
        return key_id

    @property
    def enabled(self) -> bool:
        """Whether any key is configured: the codec is installed (it may still only decrypt)."""
        return bool(self.keys)


class CodecServerSettings(BaseModel):
    """Who may use ``sas codec-server``: it decrypts whatever it is sent (docs/security.md)."""

    token: SecretStr | None = Field(
        default=None,
        description="Bearer token every /encode and /decode call must carry; unset = no token asked for.",
    )
    allowed_hosts: list[str] = Field(
        default=["localhost", "127.0.0.1"],
        description="Host header values served (port ignored, '*.example.com' allowed); others get 400.",
    )


class ScheduleSettings(BaseModel):
    """Bounds of ``sas schedule create``: each run of a schedule is a real task (a real charge)."""

    min_interval_s: int = Field(
        default=60,
        ge=1,
        le=86_400,
        description="Shortest --every a schedule may have, in seconds (cron's own finest step is a minute).",
    )


class CallbackSettings(BaseModel):
    """Status events posted to a task's callback URL (the pattern's private response queue)."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected secret is not printed

    secret: SecretStr | None = Field(
        default=None,
        description="Standard Webhooks secret (whsec_<base64>): signs each post (webhook-signature); see docs/webhooks.md.",
    )

    _secret_form = field_validator("secret")(_standard_webhooks_secret)


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
            if name != WORKFLOW_QUEUE and not _SERVICE_NAME.match(name):
                raise ValueError(f"{name!r}: use 'workflows' or a service's name")
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
            if not _TASK_TYPE_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a task type name (1-40 of a-z 0-9 _, starting with a letter)")
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
_TASK_TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


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
    outbound: OutboundPolicy = Field(default_factory=OutboundPolicy)
    codec_server: CodecServerSettings = CodecServerSettings()
    schedules: ScheduleSettings = ScheduleSettings()
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
