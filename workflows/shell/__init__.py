"""The Scheduler's Temporal shell: it carries out what the pure core (``workflows/core/``)
decides, as named collaborators a workflow composes. One role per module: ``task_run`` (the
run's state and the outlets every change goes through), ``acceptance`` (the input validated,
the task accepted), ``forward`` (the stages, each step through its Agent), ``waits`` (wait
steps), ``decisions`` (the decisions a waiting step takes, and where undoing begins), ``undo``
(the one undo engine, for the Scheduler and the clean-up), ``operator`` (the operator
protocol's signals, updates and query, declared once for every sas workflow), ``agents`` (an
Agent's activity: start, retry policy, failure), ``records`` (mirror writes and the audit log,
as local activities), ``publish`` (what the UI shows; ``live_details`` tells its current details when asked),
``interceptors`` (the list every worker running sas's workflows takes) and ``notify`` (the
submitter's callbacks)."""
