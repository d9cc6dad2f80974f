"""sas's order example: ``order`` (reserve -> charge -> ship) and ``preorder`` (reserve -> charge).

- ``models``: the inputs and the services' answers;
- ``steps``: the services, the Agents' declarations and the steps;
- ``story``: what the UI says of an order (its summary and details);
- ``workflows``: the task types, named in the ``sas.task_types`` entry point group;
- ``agents``: the hand-written Agents, named by the services and loaded by the worker only;
- ``demo``: the orders ``sas demo`` runs, named in the ``sas.demos`` entry point group.

Nothing is imported here: the workflow sandbox imports this package for every run.
"""
