"""The Scheduler's pure core: the state machine over a task's plan (``machine``) and whether
an operator's or the Supervisor's request applies (``requests``). Nothing here imports
Temporal; ``workflows/shell/`` runs it."""
