"""``sas setup``: prepare a Temporal namespace for sas (its custom search attributes)."""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client

from sas.task_models.search_attributes import SEARCH_ATTRIBUTES

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
}


async def missing_search_attributes(client: Client) -> list[str]:
    """sas's search attributes the namespace does not have (a worker upserts none until `sas setup`)."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return sorted(name for name in SEARCH_ATTRIBUTES if name not in existing.custom_attributes)


async def register_search_attributes(client: Client) -> list[str]:
    """Add the attributes the namespace lacks; returns their names (idempotent)."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing = {name: _TYPES[kind] for name, kind in SEARCH_ATTRIBUTES.items() if name not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
