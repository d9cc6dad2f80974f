"""The Scheduler's Temporal shell: it carries out what the pure core (``workflows/core/``)
decides. One role per module: ``agents`` (an Agent's activity: start, retry policy, failure),
``records`` (mirror writes and the audit log, as local activities), ``publish`` (what the UI
shows), ``notify`` (the submitter's callbacks), ``waits`` (wait steps), ``undo`` (the one undo
engine, for the Scheduler and the clean-up) and ``host`` (the workflow base class: the
operator protocol's signals, updates and query)."""
