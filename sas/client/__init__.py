"""sas's task client: start tasks and act on them as an operator, from code (``TaskClient``).

The ``sas`` command line is a thin layer over it. Its public names are exported from
``sas.api.client``; the modules here are sas's own and may change in any release."""
