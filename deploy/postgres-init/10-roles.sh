#!/usr/bin/env bash
# Roles and databases of the sas stack, each role with only what it needs. The postgres
# image runs this once, as its superuser, when it initialises an empty data volume
# (mounted at /docker-entrypoint-initdb.d by docker-compose.yml). The superuser is then
# used by nobody else.
#
#   temporal      owns Temporal's two databases (the schema job and the server use it);
#                 cannot connect to sas's.
#   sas_migrate   owns sas's database: `sas migrate` creates and alters its tables.
#   sas_app       what the worker and the Supervisor run as: reads and writes rows in
#                 sas's tables, cannot create, alter or drop anything, cannot connect to
#                 Temporal's databases.
# None of them is a superuser or may create roles or databases. The remote services
# get no role at all.
#
# Names can be changed through the environment (the tests use fresh ones); passwords
# are required. psql quotes every value (:'pw' as a literal, :"name" as an identifier),
# so a password with quotes in it stays a password.
set -euo pipefail

: "${TEMPORAL_DB_PASSWORD:?set TEMPORAL_DB_PASSWORD}"
: "${MIGRATE_DB_PASSWORD:?set MIGRATE_DB_PASSWORD}"
: "${APP_DB_PASSWORD:?set APP_DB_PASSWORD}"

psql --no-psqlrc -v ON_ERROR_STOP=1 \
    --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
    -v temporal_role="${TEMPORAL_DB_USER:-temporal}" \
    -v temporal_db="${TEMPORAL_DB_NAME:-temporal}" \
    -v visibility_db="${TEMPORAL_VISIBILITY_DB_NAME:-temporal_visibility}" \
    -v sas_owner="${MIGRATE_DB_USER:-sas_migrate}" \
    -v sas_app="${APP_DB_USER:-sas_app}" \
    -v sas_db="${STATE_DB_NAME:-sas}" \
    -v temporal_password="$TEMPORAL_DB_PASSWORD" \
    -v sas_owner_password="$MIGRATE_DB_PASSWORD" \
    -v sas_app_password="$APP_DB_PASSWORD" \
    <<'SQL'
CREATE ROLE :"temporal_role" LOGIN PASSWORD :'temporal_password'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
CREATE ROLE :"sas_owner" LOGIN PASSWORD :'sas_owner_password'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
CREATE ROLE :"sas_app" LOGIN PASSWORD :'sas_app_password'
    NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;

CREATE DATABASE :"temporal_db" OWNER :"temporal_role";
CREATE DATABASE :"visibility_db" OWNER :"temporal_role";
CREATE DATABASE :"sas_db" OWNER :"sas_owner";

-- By default every role may connect to every database (and make temp tables there):
-- take that from PUBLIC, so a database is open to its owner and to whom it is granted.
REVOKE ALL ON DATABASE :"temporal_db" FROM PUBLIC;
REVOKE ALL ON DATABASE :"visibility_db" FROM PUBLIC;
REVOKE ALL ON DATABASE :"sas_db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"sas_db" TO :"sas_app";

\connect :"sas_db"
-- PostgreSQL 15+ already keeps CREATE on schema public from PUBLIC; say so for older ones.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"sas_app";
-- Tables and sequences the migrations create (as sas_migrate) are usable by sas_app,
-- for rows only: no ALTER, DROP, TRUNCATE, REFERENCES or TRIGGER.
ALTER DEFAULT PRIVILEGES FOR ROLE :"sas_owner" IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"sas_app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"sas_owner" IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO :"sas_app";
SQL

echo "sas: roles ${TEMPORAL_DB_USER:-temporal}, ${MIGRATE_DB_USER:-sas_migrate}, ${APP_DB_USER:-sas_app} and their databases are ready"
