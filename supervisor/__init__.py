"""The Supervisor: a Temporal workflow that sweeps the state store for steps that
failed or overran their complete-by, decides what to do (``supervisor/decide/policy.py``)
and asks the Scheduler to do it. Run it with ``python -m sas.supervisor``.

Its rooms, one role each: ``run`` (the workflow, its worker, the keeper), ``detect`` (what a sweep
looks for), ``act`` (each decision claimed once, then sent), ``alert`` (raised once, grouped into
incidents, sent to the webhook) and ``decide`` (pure); beside them, what they share.

Kept free of heavy imports: the workflow sandbox loads this package.
"""

if __name__ != "sas.supervisor":
    # This folder is installed as sas.supervisor (sas/supervisor links to it). Imported by its bare name, from
    # the repository root, it would be a second copy of every class in it, which Temporal's data
    # converter and isinstance checks would not recognise.
    raise ImportError(f"import sas.supervisor, not {__name__}: the supervisor/ folder is part of the sas package")
