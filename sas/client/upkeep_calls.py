"""``TaskClient``'s upkeep of the stack: the mirror brought in line with Temporal
(``sas.client.reconciling``) and whether this host's worker or Supervisor is alive
(``sas.client.health``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sas.client import inputs
from sas.client.core import ClientCore, typed

if TYPE_CHECKING:
    from sas.client.health import Health, Role
    from sas.client.reconciling import Reconciled


class UpkeepCalls(ClientCore):
    """The upkeep of ``TaskClient`` (its part for ``sas reconcile`` and ``sas health``)."""

    @typed
    async def reconcile(self, task_id: str | None = None, *, dry_run: bool = False, limit: int = 500) -> Reconciled:
        """Bring the state store in line with Temporal, as the Supervisor does: for ``task_id``,
        or for every task the mirror says is unfinished (at most ``limit``, up to 10,000) and
        then the finished ones whose steps disagree with them. A row Temporal shows done is
        repaired with an audit entry; nothing is undone. ``dry_run``: say what would be
        repaired, change nothing. A task that cannot be looked at says why in its
        ``ReconciledTask.temporal``; the others are reconciled."""
        from sas.client import reconciling

        if task_id is not None:
            inputs.check_task_id(task_id)
        reconciling.check_limit(limit)
        self.store.require()  # no state store here is said before Temporal is asked
        return await reconciling.reconcile(await self._temporal(), self.store, task_id, dry_run=dry_run, limit=limit)

    @typed
    async def health(
        self, role: Role, *, max_age_s: float | None = None, max_sweep_age_s: float | None = None
    ) -> Health:
        """Whether the ``worker`` or ``supervisor`` process of *this host* polls both kinds of its
        task queue (its last poll within ``max_age_s``, default 90 s); for the Supervisor, also
        whether every shard's workflow runs and has swept within ``max_sweep_age_s`` (default
        ``SAS_SUPERVISOR__SWEEP_BOUND_S``). ``Unhealthy`` says what is wrong. It connects as
        ``health`` within 10 s unless this client is connected already."""
        from sas.client import health

        max_age = health.DEFAULT_MAX_AGE_S if max_age_s is None else max_age_s
        return await health.check(self._client, self.settings, role, max_age, max_sweep_age_s)
