"""The breaker's error type, for the Scheduler's import (``workflows/shell/agents.py``) until it
imports ``sas.breaker.model`` itself; the breaker lives in ``sas/breaker/``."""

from sas.breaker.model import BREAKER_OPEN

__all__ = ["BREAKER_OPEN"]
