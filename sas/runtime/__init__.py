"""What every sas process shares, below the Supervisor and the CLI: connecting to Temporal
(``connect``), logging and entry points (``logs``, ``entry``), child processes that never outlive
their parent (``processes``, ``lifeline``), readiness checks (``readiness``), the search
attributes (``search_attributes``) and the stack on this machine (``local_stack``).

Nothing is imported here: ``python -m sas.runtime.lifeline`` starts with the standard library only."""
