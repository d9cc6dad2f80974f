"""Each remote service's circuit breaker, in one package: ``model.py`` (the shared row as every
process reads it, and what it means at a time), ``settings.py`` (``SAS_SERVICES__<NAME>__BREAKER__*``),
``rows.py`` (the shared rows' writes: transitions, their alert, forced ones audited),
``service.py`` (a worker's breaker of each service: admits calls, counts them, keeps the row in
step), ``gate.py`` (the slot supplier that keeps a held service's worker from polling) and
``held.py`` (which services' work the Supervisor sees held).

Nothing is re-exported here: the workflows and the settings import ``model`` and ``settings``,
which import nothing of sas, without loading the database code of the rest.
"""
