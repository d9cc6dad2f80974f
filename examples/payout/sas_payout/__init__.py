"""A bulk payout on sas: the run is validated, each recipient is paid (one call per recipient,
a few refusals tolerated), then the notices of the run are sent by a child task; when the payout
cannot be made, what was done is undone.

- ``models``: the payout's input and what its services answer;
- ``workflows``: the services, the steps and the ``payout`` type (its ``sas.task_types`` entry point);
- ``notice``: the ``payout_notice`` type, which the payout runs as its child task;
- ``story``: what the UI says of a payout (its summary and details);
- ``services``: the runs, bank and notices services themselves (``sas-payout-services``).

Nothing is imported here: the workflow sandbox imports this package for every run.
"""
