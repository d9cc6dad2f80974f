# The sas application image: worker, supervisor, remote services and the `sas`
# CLI (migrations, setup, operator commands). docker-compose.yml picks the
# process per service with `command:`; the default is the Scheduler + Agents
# worker.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# An unprivileged user owns nothing but its scratch dirs: the code stays read-only.
RUN groupadd --system --gid 10001 sas \
    && useradd --system --uid 10001 --gid sas --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin sas

WORKDIR /app

# Dependencies first, so editing the code does not reinstall them: exactly the
# locked versions, checked against their hashes. requirements-runtime.lock is the
# runtime part of requirements.lock (same versions, no test, dev or bench tools,
# no Temporal binaries); docs/testing.md says how to refresh both.
COPY requirements-runtime.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements-runtime.lock

# /app/.sas: local state (`sas demo`); /data: the remote-services ledger, a
# named volume in docker-compose.yml that starts with this ownership.
COPY . .
# The examples register their task types as a team's package would (sas.task_types entry points);
# the demo's remote services are a package of their own too (examples/demo_services), not sas's.
RUN pip install --no-cache-dir --no-deps . ./examples/orders ./examples/trip ./examples/payout ./examples/demo_services \
    && mkdir -p /app/.sas /data \
    && chown sas:sas /app/.sas /data

USER sas

CMD ["python", "worker.py"]
