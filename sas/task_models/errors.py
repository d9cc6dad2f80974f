"""The error types sas's activities raise that workflows tell apart (``ApplicationError.type``)."""

from __future__ import annotations

# The state store refused a mirror write for good (a value it can never store): not retried, one
# alert raised (sas/state_store/rejections.py). The Scheduler carries on; Temporal holds the truth.
MIRROR_WRITE_REFUSED = "MirrorWriteRefused"
