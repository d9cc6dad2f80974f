"""deploy/k8s/workers.yaml, the example of workers scaled per service with KEDA's Temporal
scaler (docs/operator.md): it names the real queues, and each Deployment's settings are valid
and select the queues its ScaledObject scales on."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from sas.activities import check_service_names
from sas.settings import Settings
from sas.task_models.queues import service_queue

# The manifest deploys the image's order example (examples/orders): its three services. Other
# installed task types (the trip example in CI) are not part of it.
ORDER_SERVICES = ("inventory", "payment", "shipping")

yaml = pytest.importorskip("yaml", reason="pip install pyyaml (in the `test` extra)")

MANIFEST = Path(__file__).resolve().parents[1] / "deploy" / "k8s" / "workers.yaml"
DOCS: list[dict[str, Any]] = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


CONFIG = by_kind("ConfigMap")["sas-env"]["data"]
DEPLOYMENTS = by_kind("Deployment")
SCALED = by_kind("ScaledObject")


def container_env(deployment: dict[str, Any]) -> dict[str, str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"configMapRef": {"name": "sas-env"}} in container["envFrom"]
    return {**CONFIG, **{e["name"]: e["value"] for e in container.get("env", [])}}


def settings_of(deployment: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key, value in container_env(deployment).items():
        monkeypatch.setenv(key, value)
    # What the Secret sas-secrets supplies (values made up here).
    monkeypatch.setenv("SAS_DATABASE__URL", "postgresql+asyncpg://sas_app@db/sas")
    monkeypatch.setenv("SAS_ENCRYPTION__KEYS", json.dumps({"k1": base64.b64encode(bytes(32)).decode()}))
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_every_service_has_a_worker_scaled_on_its_own_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = CONFIG["SAS_TEMPORAL__TASK_QUEUE"]
    for service in ORDER_SERVICES:
        name = f"sas-worker-{service}"
        settings = settings_of(DEPLOYMENTS[name], monkeypatch)
        check_service_names(settings.services, settings.worker.queues)
        assert settings.worker.queues == [service]
        [trigger] = SCALED[name]["spec"]["triggers"]
        assert SCALED[name]["spec"]["scaleTargetRef"]["name"] == name
        assert trigger["type"] == "temporal"
        meta = trigger["metadata"]
        assert meta["taskQueue"] == service_queue(settings.temporal.task_queue, service) == f"{queue}.{service}"
        assert meta["queueTypes"] == "activity"  # a service's queue holds only its Agents' tasks
        assert meta["endpoint"] == settings.temporal.address and meta["namespace"] == settings.temporal.namespace
        assert int(meta["targetQueueSize"]) >= 1


def test_the_scheduler_plans_every_service_on_its_own_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # The queue is decided where a task is accepted: by the Scheduler's Deployment's settings.
    settings = settings_of(DEPLOYMENTS["sas-worker-workflows"], monkeypatch)
    for service in ORDER_SERVICES:
        assert settings.services.has_own_queue(service), service


def test_the_scheduler_runs_apart_and_every_queue_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[str] = []
    for deployment in DEPLOYMENTS.values():
        settings = settings_of(deployment, monkeypatch)
        served += settings.worker.queues or []
    assert sorted(served) == sorted(["workflows", *ORDER_SERVICES])  # each queue by exactly one Deployment
    [trigger] = SCALED["sas-worker-workflows"]["spec"]["triggers"]
    assert trigger["metadata"]["taskQueue"] == CONFIG["SAS_TEMPORAL__TASK_QUEUE"]
    assert set(trigger["metadata"]["queueTypes"].split(",")) == {"workflow", "activity"}


def test_a_rate_limit_in_the_example_is_a_valid_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    payment = settings_of(DEPLOYMENTS["sas-worker-payment"], monkeypatch).services.service("payment")
    assert payment.max_per_second == 50 and payment.breaker.enabled
    assert json.loads(container_env(DEPLOYMENTS["sas-worker-payment"])["SAS_WORKER__QUEUES"]) == ["payment"]
