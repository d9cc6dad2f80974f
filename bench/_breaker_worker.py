"""sas's own worker (``worker.py``) with one more task type registered, the bench's
``stock`` (bench/_breaker_types.py): what bench/breaker.py runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from sas.runtime.entry import run_entry
    from sas.worker import run_worker
    from sas.workflows import registry

    registry.TASK_TYPE_MODULES["stock"] = "bench._breaker_types"  # a task type is one line here
    registry.task_types.cache_clear()
    run_entry(run_worker)


if __name__ == "__main__":
    main()
