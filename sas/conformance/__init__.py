"""The conformance kit: a team's running service checked against sas's HTTP contract
(docs/http-contract.md), clause by clause. ``sas check-service`` and ``sas.api.contract.check_service``
are its two faces; the checks are here, once."""

from sas.conformance.clauses import SlowCall, SlowForward
from sas.conformance.kit import assert_conforms, builtin_services_slowdown, check_service, checked_url
from sas.conformance.report import Clause, ClauseResult, ServiceReport, Verdict
from sas.conformance.target import ExplicitCalls, ServiceCheckError

__all__ = [
    "Clause",
    "ClauseResult",
    "ExplicitCalls",
    "ServiceCheckError",
    "ServiceReport",
    "SlowCall",
    "SlowForward",
    "Verdict",
    "assert_conforms",
    "builtin_services_slowdown",
    "check_service",
    "checked_url",
]
