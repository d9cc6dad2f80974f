"""What a step's Agent returns: one pydantic model per forward action and per undo, each a
``StepResultModel`` declared by the task type (``sas.api``).

A result carries what the remote service said about the effect, above all the service's own
id for it (``ch_…`` for a charge): later steps receive the results of earlier ones, and a
step's undo receives its own forward result, so a refund names the charge it refunds, as a
real provider requires.

A field marked ``Secret`` (``token: Annotated[str, Secret]``) reaches the later steps and the
undo (it is in the workflow's history, encrypted there when ``SAS_ENCRYPTION__KEYS`` is set)
but is *left out* of everything else: the state store's ``result`` column, the ``status``
query, ``sas show`` and the callbacks. Leaving it out, rather than storing it encrypted, keeps
one rule for every reader. So a field an undo needs in a clean-up (which works from the state
store only) must not be secret; the Agents look an unknown id up by our key instead.
"""

from __future__ import annotations

import weakref
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, StringConstraints

# The most a step's result may weigh as Temporal's JSON (non-ASCII escaped): it is kept in the
# task's history, its status query and every later step's call, so one service answering a
# large result must not make them too large to read. A larger answer is garbage (retried).
MAX_RESULT_BYTES: Final = 64 * 1024


class SecretMarker:
    """Marks a result field as secret (see the module docstring); use the ``Secret`` instance."""

    def __repr__(self) -> str:
        return "Secret"


Secret: Final = SecretMarker()
"""Marks a result field as secret: ``client_secret: Annotated[str | None, Secret] = None``.

It reaches the later steps and the undo, and is left out of the state store, ``sas show``, the
``status`` query and the callbacks (the module's docstring says why); so a field an undo needs
must not be secret."""

# Provider ids are bounded and printable: they are stored, shown and sent back to the service.
ProviderId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")]
"""A remote service's own id for an effect (``ch_…`` for a charge), which the undo names: 1 to
200 printable ASCII characters without spaces, since it is stored, shown and sent back."""


class StepResultModel(BaseModel):
    """Base of every result model: extra fields the service sends are ignored, not stored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# Read at every step's result by the Scheduler: once per model class (a class a run re-imports
# is another key, and goes with it).
_SECRET_FIELDS: weakref.WeakKeyDictionary[type[BaseModel], frozenset[str]] = weakref.WeakKeyDictionary()


def secret_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names of ``model``'s fields marked ``Secret``."""
    found = _SECRET_FIELDS.get(model)
    if found is None:
        found = _SECRET_FIELDS[model] = frozenset(
            name for name, info in model.model_fields.items() if any(m is Secret for m in info.metadata)
        )
    return found


def shown(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a result of ``model``) without its secret fields: what may be stored and shown."""
    hidden = secret_fields(model)
    return {k: v for k, v in data.items() if k not in hidden}
