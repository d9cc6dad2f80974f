"""deploy/postgres-init/10-roles.sh, run for real against the local PostgreSQL (as the
postgres image runs it, as the superuser) with fresh role and database names: each role
gets exactly the privileges the compose file relies on, and no more.

- temporal owns Temporal's two databases and cannot connect to sas's;
- sas_migrate owns sas's database and runs the migrations;
- sas_app, what the worker and Supervisor run as, reads and writes rows there (a whole
  order goes through), but can create, alter, drop or truncate nothing, and cannot
  connect to Temporal's databases;
- none is a superuser or may create databases or roles.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client

from sas import state_store
from sas.task_models import TaskState
from sas_demo_services.launcher import ServiceProcess
from tests.helpers import fresh_id
from tests.postgres import PG_ADMIN_URL, _run, postgres_available
from tests.stack import start_stack

pytestmark = pytest.mark.slow  # worker and Supervisor processes as the deployment's roles

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "postgres-init" / "10-roles.sh"
ADMIN = urlsplit(PG_ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"))


@dataclass(frozen=True)
class Cluster:
    """The names one run of the init script was given."""

    temporal: str
    sas_migrate: str
    sas_app: str
    temporal_db: str
    visibility_db: str
    sas_db: str

    @property
    def roles(self) -> list[str]:
        return [self.temporal, self.sas_migrate, self.sas_app]

    @property
    def databases(self) -> list[str]:
        return [self.temporal_db, self.visibility_db, self.sas_db]

    def dsn(self, role: str, database: str) -> str:
        # Trust auth on the test server: the role, not the password, is what is tested.
        return f"postgresql://{role}@{ADMIN.hostname}:{ADMIN.port or 5432}/{database}"

    def url(self, role: str) -> str:
        return self.dsn(role, self.sas_db).replace("postgresql://", "postgresql+asyncpg://")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if not postgres_available():
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL}")
    suffix = uuid.uuid4().hex[:10]
    names = Cluster(
        temporal=f"temporal_{suffix}",
        sas_migrate=f"sas_migrate_{suffix}",
        sas_app=f"sas_app_{suffix}",
        temporal_db=f"temporal_{suffix}",
        visibility_db=f"temporal_visibility_{suffix}",
        sas_db=f"sas_{suffix}",
    )
    env = {
        **os.environ,
        "PGHOST": ADMIN.hostname or "127.0.0.1",
        "PGPORT": str(ADMIN.port or 5432),
        "POSTGRES_USER": ADMIN.username or "postgres",
        "POSTGRES_DB": ADMIN.path.lstrip("/") or "postgres",
        "TEMPORAL_DB_PASSWORD": "t-pw",
        "MIGRATE_DB_PASSWORD": "m-pw",
        # Quotes in a password stay inside the password.
        "APP_DB_PASSWORD": "a'pw\"; DROP ROLE postgres; --",
        "TEMPORAL_DB_USER": names.temporal,
        "MIGRATE_DB_USER": names.sas_migrate,
        "APP_DB_USER": names.sas_app,
        "TEMPORAL_DB_NAME": names.temporal_db,
        "TEMPORAL_VISIBILITY_DB_NAME": names.visibility_db,
        "STATE_DB_NAME": names.sas_db,
    }
    try:
        result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        yield names
    finally:
        for database in names.databases:
            _run(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for role in names.roles:
            _run(f'DROP ROLE IF EXISTS "{role}"')


async def admin_fetch(sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"), timeout=5)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def can_connect(dsn: str) -> bool:
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except asyncpg.InsufficientPrivilegeError:
        return False
    await conn.close()
    return True


async def test_no_role_is_privileged(cluster: Cluster) -> None:
    rows = await admin_fetch(
        "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, rolcanlogin "
        "FROM pg_roles WHERE rolname = ANY($1::text[])",
        cluster.roles,
    )
    assert {r["rolname"] for r in rows} == set(cluster.roles)
    for row in rows:
        assert row["rolcanlogin"], row["rolname"]
        assert not any(
            row[a] for a in ("rolsuper", "rolcreatedb", "rolcreaterole", "rolreplication", "rolbypassrls")
        ), dict(row)
    # And none is a member of another role (nothing inherited).
    members = await admin_fetch(
        "SELECT r.rolname FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = ANY($1::text[])",
        cluster.roles,
    )
    assert not members


async def test_each_database_is_open_to_its_own_roles_only(cluster: Cluster) -> None:
    owners = {
        r["datname"]: r["owner"]
        for r in await admin_fetch(
            "SELECT datname, pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = ANY($1::text[])",
            cluster.databases,
        )
    }
    assert owners == {
        cluster.temporal_db: cluster.temporal,
        cluster.visibility_db: cluster.temporal,
        cluster.sas_db: cluster.sas_migrate,
    }
    allowed = {
        (cluster.temporal, cluster.temporal_db),
        (cluster.temporal, cluster.visibility_db),
        (cluster.sas_migrate, cluster.sas_db),
        (cluster.sas_app, cluster.sas_db),
    }
    for role in cluster.roles:
        for database in cluster.databases:
            expected = (role, database) in allowed
            assert await can_connect(cluster.dsn(role, database)) == expected, (
                f"{role} {'cannot' if expected else 'can'} connect to {database}"
            )
    # Not even temporary tables for the application role.
    [row] = await admin_fetch("SELECT has_database_privilege($1, $2, 'TEMP') AS temp", cluster.sas_app, cluster.sas_db)
    assert not row["temp"]


async def test_sas_app_uses_rows_but_cannot_change_the_schema(cluster: Cluster) -> None:
    await state_store.upgrade_async(cluster.url(cluster.sas_migrate))
    # The worker and the Supervisor run the (then no-op) upgrade at start-up, as sas_app.
    await state_store.upgrade_async(cluster.url(cluster.sas_app))

    conn = await asyncpg.connect(cluster.dsn(cluster.sas_app, cluster.sas_db), timeout=5)
    try:
        tables = [
            r["tablename"]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        ]
        assert "tasks" in tables and "alembic_version" in tables, tables
        for table in tables:
            await conn.fetch(f'SELECT * FROM "{table}" LIMIT 1')
        for statement in (
            "CREATE TABLE intruder (id int)",
            "ALTER TABLE tasks ADD COLUMN intruder int",
            "DROP TABLE tasks",
            "TRUNCATE tasks",
            "CREATE TEMP TABLE intruder (id int)",
            "UPDATE alembic_version SET version_num = version_num",  # allowed: a row
        ):
            if statement.startswith("UPDATE"):
                await conn.execute(statement)
                continue
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    finally:
        await conn.close()

    # Every table the migrations made: rows only (information_schema is per database:
    # ask inside sas's, as its owner).
    conn = await asyncpg.connect(cluster.dsn(cluster.sas_migrate, cluster.sas_db), timeout=5)
    try:
        granted = {
            r["table_name"]: r["privileges"]
            for r in await conn.fetch(
                "SELECT table_name, string_agg(privilege_type, ',' ORDER BY privilege_type) AS privileges "
                "FROM information_schema.role_table_grants WHERE grantee = $1 GROUP BY table_name",
                cluster.sas_app,
            )
        }
        every = {
            r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    finally:
        await conn.close()
    assert granted == dict.fromkeys(every, "DELETE,INSERT,SELECT,UPDATE")


@pytest_asyncio.fixture
async def migrated(cluster: Cluster) -> AsyncIterator[Cluster]:
    await state_store.upgrade_async(cluster.url(cluster.sas_migrate))
    yield cluster


async def test_an_order_goes_through_with_the_worker_and_supervisor_as_sas_app(
    migrated: Cluster, client: Client, temporal_address: str, services: ServiceProcess
) -> None:
    """The privileges are enough for what the stack really does: the Scheduler's and the
    Agents' writes, and the Supervisor's scans and decisions."""
    async with start_stack(client, temporal_address, services.url, migrated.url(migrated.sas_app)) as stack:
        task_id = fresh_id("roles")
        # Both quick attempts fail, so the Supervisor has to decide (and record) a retry.
        await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
        result = await asyncio.wait_for((await stack.submit(task_id)).result(), timeout=120)
        assert result.state == TaskState.PROCESSED, result
        record = await stack.record(task_id)
        assert record is not None and record.task.state == "Processed"
        decisions = [(d.kind, d.observed_state) for d in await stack.decisions(task_id) if d.kind != "wait"]
        # The failed step's retry, written under sas_app. On a loaded machine an attempt can also
        # overrun its complete-by first, and the Supervisor nudges it (a retry seen Processing);
        # nothing was undone or parked either way.
        assert ("retry", "Failed") in decisions, decisions
        assert {kind for kind, _ in decisions} == {"retry"}, decisions
