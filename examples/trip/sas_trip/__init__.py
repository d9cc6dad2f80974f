"""A trip on sas: the flight and the hotel are booked side by side, then the card is charged
with what they cost; when the trip cannot be booked, what was done is undone.

- ``models``: the trip's input and what its services answer;
- ``workflows``: the services, the steps and the task type (the ``sas.task_types`` entry point);
- ``agents``: the charge's hand-written Agent, loaded by the worker only;
- ``services``: the flight, hotel and card services themselves (``sas-trip-services``).

Nothing is imported here: the workflow sandbox imports this package for every run.
"""
