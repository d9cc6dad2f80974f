"""``python -m sas.supervisor``: run a Supervisor worker (several may run; one Supervisor acts)."""

from sas.runtime.entry import run_entry
from sas.supervisor.run.worker import run_supervisor

if __name__ == "__main__":
    run_entry(run_supervisor)
