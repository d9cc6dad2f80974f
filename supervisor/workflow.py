"""The Supervisor workflow: sweep, decide, act, sleep - and continue-as-new to stay small.

Temporal runs at most one workflow per id, so with a fixed id there is exactly
one Supervisor however many Supervisor workers run for availability.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from supervisor.models import ApplyResult, ScanResult, SupervisorInput
    from supervisor.policy import decide

_ACTIVITY_TIMEOUT = timedelta(seconds=60)
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name="SupervisorWorkflow")
class SupervisorWorkflow:
    def __init__(self) -> None:
        self._woken = False
        self._sweeps = 0
        self._last: ApplyResult | None = None

    @workflow.run
    async def run(self, state: SupervisorInput) -> None:
        self._sweeps = state.sweeps_done
        sweeps_this_run = 0
        while True:
            scan = await workflow.execute_activity(
                "supervisor.scan", result_type=ScanResult, start_to_close_timeout=_ACTIVITY_TIMEOUT, retry_policy=_RETRY
            )
            decisions = [decide(step, scan.policy, workflow.now()) for step in scan.due]
            if decisions or scan.unsent:
                self._last = await workflow.execute_activity(
                    "supervisor.apply",
                    decisions,
                    result_type=ApplyResult,
                    start_to_close_timeout=_ACTIVITY_TIMEOUT,
                    retry_policy=_RETRY,
                )
            self._sweeps += 1
            sweeps_this_run += 1
            if sweeps_this_run >= scan.policy.sweeps_per_run or workflow.info().is_continue_as_new_suggested():
                workflow.continue_as_new(SupervisorInput(sweeps_done=self._sweeps))
            self._woken = False
            try:
                await workflow.wait_condition(lambda: self._woken, timeout=timedelta(seconds=scan.policy.interval_s))
            except TimeoutError:
                pass

    @workflow.signal(name="wake")
    def wake(self) -> None:
        """A Scheduler recorded a failure: sweep now rather than at the next tick."""
        self._woken = True

    @workflow.query(name="sweeps")
    def sweeps(self) -> int:
        return self._sweeps
