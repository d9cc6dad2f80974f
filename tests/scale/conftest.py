"""Scale tests: PostgreSQL and many processes. The PostgreSQL cases skip (and say why)
when no server is reachable, and fail instead when CI=true."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import fresh_database, require_postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    require_postgres()
    with fresh_database() as url:
        yield url
