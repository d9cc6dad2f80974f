"""The Supervisor: a Temporal workflow that sweeps the state store for steps that
failed or overran their complete-by, decides what to do (``supervisor/policy.py``)
and asks the Scheduler to do it. Run it with ``python -m supervisor``.

Kept free of heavy imports: the workflow sandbox loads this package.
"""
