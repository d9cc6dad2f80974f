"""The remote services: the defaults, each service's own settings by name, and one service's settings
as a worker uses them."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from sas.breaker.settings import BreakerSettings, ReleaseSettings, ResolvedBreaker
from sas.task_models.ids import NAME

# An HTTP header name (RFC 9110 token): anything else would be refused by httpx at the first call.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


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
        description="Calls a second the service sees at most, over every worker, retries included: no 1 s"
        " holds more than floor(N) of its requests (below 1, one per 1/N s). Each call holds one of the"
        " service's permits in the state store from before it is sent until 1 s after its exchange ends;"
        " Temporal's own limit on the service's queue (max_task_queue_activities_per_second) keeps the"
        " backlog there. None if unset.",
    )
    pollers: int = Field(default=5, ge=1, le=100, description="Pollers each worker runs on the service's task queue.")
    breaker: BreakerSettings = BreakerSettings()
    release: ReleaseSettings = ReleaseSettings()
    own_queue: bool = Field(
        default=False,
        description="Run this service's Agents on a task queue of their own (<task_queue>.<service>): calls"
        " waiting for it hold none of the workflow worker's slots, and its backlog and workers are its own."
        " Implied by max_concurrency, max_per_second or breaker.enabled; else its Agents share the workflow's"
        " queue, where Temporal hands a call to the worker with the workflow task that scheduled it.",
    )

    @property
    def wants_own_queue(self) -> bool:
        """Whether anything set for this service needs a queue of its own: a limit on calls in
        flight or per second, or a breaker, each enforced where the service's work waits."""
        return (
            self.own_queue
            or self.max_concurrency is not None
            or self.max_per_second is not None
            or self.breaker.enabled
        )

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
    own_queues: bool = Field(
        default=False,
        description="Every service's Agents on a task queue of their own, as if each set own_queue.",
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
            if not NAME.fullmatch(name):
                raise ValueError(f"service name {name!r}: use 1-40 lowercase letters, digits or '_'")
        return self

    @property
    def named(self) -> dict[str, ServiceSettings]:
        """The services given settings of their own, by name."""
        return dict(self.__pydantic_extra__ or {})

    def has_own_queue(self, name: str) -> bool:
        """Whether service ``name``'s Agents run on a task queue of their own (task_models/queues.py)."""
        own = self.named.get(name)
        return self.own_queues or (own is not None and own.wants_own_queue)

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
            # The breaker runs the release of the work it held: its schedule goes with it.
            breaker=ResolvedBreaker(**own.breaker.model_dump(), release=own.release, max_per_second=own.max_per_second),
            own_queue=self.has_own_queue(name),
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
    # Whether its Agents run on its own task queue rather than the workflow's (task_models/queues.py).
    own_queue: bool = False
