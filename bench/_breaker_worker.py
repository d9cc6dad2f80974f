"""sas's own worker (``worker.py``) with one more task type registered, the bench's
``stock`` (bench/_breaker_types.py): what bench/breaker.py runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import os

    from sas.runtime.entry import run_entry
    from sas.worker import run_worker

    # A task type in code that is not installed: named by the setting, as a team's would be.
    os.environ["SAS_TASK_TYPES__MODULES"] = "bench._breaker_types"
    run_entry(run_worker)


if __name__ == "__main__":
    main()
