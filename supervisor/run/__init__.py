"""How the Supervisor runs: its workflow, the sweep loop that calls the rooms beside this one
(``workflow``), the worker process that polls its queue (``worker``, what ``python -m
sas.supervisor`` starts) and what keeps every shard's workflow running (``keeper``).

Nothing is re-exported here: the workflow sandbox loads this package with the workflow, and the
worker's imports (the state store, httpx) have no place there.
"""
