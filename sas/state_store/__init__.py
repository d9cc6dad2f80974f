"""The pattern's state store: the Scheduler's mirrored task and step records,
the Supervisor's decisions and the operator alerts, on SQLite or PostgreSQL."""

from sas.state_store.engine import create_engine, session_factory
from sas.state_store.migrate import upgrade, upgrade_async

__all__ = ["create_engine", "session_factory", "upgrade", "upgrade_async"]
