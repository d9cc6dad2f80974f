"""The one error shape every endpoint answers with: ``{"error": code, "message": text}``."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse


class ServiceError(Exception):
    """A refusal that becomes an HTTP error response; raising it undoes any pending write.

    Args:
        status: HTTP status code.
        code: Machine-readable error code (the ``error`` field).
        message: Human-readable explanation (the ``message`` field).
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        """The error as a JSON response."""
        return error_response(self.status, self.code, self.message)


def error_response(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """Build the standard JSON error response.

    Args:
        status: HTTP status code.
        code: Machine-readable error code.
        message: Human-readable explanation.
        headers: Extra response headers (for example ``Allow`` on a 405).

    Returns:
        The response.
    """
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)
