"""The Scheduler + Agents worker: ``python worker.py`` (or ``sas worker``, ``python -m sas.worker``).

The worker is ``sas/worker.py`` (``sas.worker``); this file is how the design card, the image
(Dockerfile, docker-compose.yml) and deploy/k8s start it. The code lives in the package because a
wheel installs packages, not loose files: setuptools can map a folder into ``sas`` but not a
single module, and a top-level ``worker`` module would sit in site-packages beside every other
distribution's names.
"""

from sas.worker import main

if __name__ == "__main__":
    main()
