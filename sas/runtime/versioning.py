"""Worker Versioning: which Worker Deployment Version a worker process serves, and how its
workflows move between versions (docs/operator.md, "Deploying new workflow code").

With ``SAS_WORKER__DEPLOYMENT_NAME`` and ``SAS_WORKER__BUILD_ID`` set, every Temporal worker of
the process (the workflow queue's, each service's, the Supervisor's) declares that version. A
task's Scheduler workflow is **pinned**: it runs to its end on the build it started on, so a
deploy never replays an order's history on code it was not written by (the non-determinism
error of docs/reliability.md), and an order's undo runs the code that did its steps. The
Supervisor **auto-upgrades**: it runs for ever (continue-as-new), and its next sweep should use
the new build's decisions; its code changes stay replay-compatible (``workflow.patched``,
tests/replay). Unset, workers are unversioned, as before.
"""

from __future__ import annotations

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from sas.settings import WorkerSettings

# Tasks (and their clean-ups) stay on the build they started on; the Supervisor follows the current one.
TASKS = VersioningBehavior.PINNED
SUPERVISOR = VersioningBehavior.AUTO_UPGRADE


def deployment_config(worker: WorkerSettings, behavior: VersioningBehavior) -> WorkerDeploymentConfig | None:
    """The version this process's workers declare, with ``behavior`` for their workflows; None
    when the settings name no deployment (unversioned workers)."""
    if worker.deployment_name is None or worker.build_id is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=worker.deployment_name, build_id=worker.build_id),
        use_worker_versioning=True,
        default_versioning_behavior=behavior,
    )
