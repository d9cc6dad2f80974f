"""The ``sas`` command line and the process plumbing its entry points share."""
