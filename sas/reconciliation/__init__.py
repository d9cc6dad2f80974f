"""The mirror brought in line with Temporal, below both of its callers: the Supervisor (which
also looks at Temporal before it acts, ``temporal_view``) and the task client (``sas reconcile``)."""
