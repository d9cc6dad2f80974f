"""sas: Scheduler Agent Supervisor on Temporal.

Every module of the application lives under this one package, so none of its names can collide
with another distribution's in site-packages. Where each part is:

- ``sas.workflows``: the Scheduler (one Temporal workflow per task type) - the repository's
  ``workflows/`` folder, linked here;
- ``sas.activities``: the Agents and their remote calls - ``activities/``, linked here;
- ``sas.supervisor``: the Supervisor workflow, where failures are decided - ``supervisor/``;
- ``sas.worker``: the Scheduler + Agents worker, which the repository's ``worker.py`` runs;
- ``sas.task_models``, ``sas.state_store``, ``sas.payload_codec``, ``sas.settings``,
  ``sas.runtime`` and ``sas.cli``: the models, the mirror, payload encryption, every setting,
  process plumbing and the ``sas`` command.

A team's own task types use ``sas.api`` alone: the public API, documented and kept across
versions. Every other module is sas's own and may change (``sas.task_types`` holds what a task
type is made of; ``examples/`` shows two teams' packages, and holds the demo's remote services,
which are not part of sas).

Nothing is imported here: the workflow sandbox imports this package for every workflow run.
"""

__all__: list[str] = []  # the public API is sas.api
