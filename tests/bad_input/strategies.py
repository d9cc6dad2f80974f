"""Hypothesis strategies for valid and invalid task input, and a helper to draw a few
examples for tests that must run against the real stack (hypothesis cannot drive an
async test that shares the session's event loop, so those draw first, then act)."""

from __future__ import annotations

import string
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

T = TypeVar("T")

# Characters that are never whitespace at either end (pydantic strips str fields) and are
# encodable (no lone surrogates).
_ANY_CHAR = st.characters(exclude_categories=["Cs"])
_EDGE_CHAR = _ANY_CHAR.filter(lambda c: not c.isspace())
_PRINTABLE_ASCII = st.sampled_from([chr(c) for c in range(0x20, 0x7F)])
_PRINTABLE_EDGE = st.sampled_from([chr(c) for c in range(0x21, 0x7F)])
_SKU_CHARS = string.ascii_letters + string.digits + "._-"
_ID_FIRST = string.ascii_letters + string.digits
_ID_REST = _ID_FIRST + "._:-"


def _trimmed(edge: st.SearchStrategy[str], inner: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    """1..max_size characters that do not start or end with whitespace."""
    one = edge
    more = st.tuples(edge, st.text(inner, max_size=max_size - 2), edge).map("".join)
    return st.one_of(one, more)


customer_ids = _trimmed(_PRINTABLE_EDGE, _PRINTABLE_ASCII, 100)
skus = st.text(_SKU_CHARS, min_size=1, max_size=64)
quantities = st.integers(1, 10_000)
amounts = st.integers(1, 100_000_000)
currencies = st.text(string.ascii_uppercase, min_size=3, max_size=3)
cards = st.text(string.digits, min_size=12, max_size=19)
# Any unicode but control characters (refused: sas/task_models/text.py), tab and newline included.
_TEXT_CHAR = st.characters(exclude_categories=["Cs", "Cc"]) | st.sampled_from("\t\n")
addresses = _trimmed(_TEXT_CHAR.filter(lambda c: not c.isspace()), _TEXT_CHAR, 500)
callback_urls = st.none() | st.builds(
    lambda host, path: f"https://{host}.example/{path}",
    st.text(string.ascii_lowercase, min_size=1, max_size=20),
    st.text(string.ascii_letters + string.digits + "/-_", max_size=50),
)


@st.composite
def valid_orders(draw: st.DrawFn, preorder: bool = False) -> dict[str, Any]:
    order: dict[str, Any] = {
        "customer_id": draw(customer_ids),
        "sku": draw(skus),
        "quantity": draw(quantities),
        "amount_cents": draw(amounts),
    }
    if not preorder:
        order["address"] = draw(addresses)
    for name, strategy in (("currency", currencies), ("card", cards), ("callback_url", callback_urls)):
        if draw(st.booleans()):
            order[name] = draw(strategy)
    return order


# --- one field made wrong -------------------------------------------------------------

_WRONG_TYPES = st.one_of(
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
_BAD_INTS = st.one_of(
    st.integers(max_value=0),  # zero and negative
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: not float(f).is_integer()),
    st.text(st.characters(exclude_categories=("Nd", "Cs")), max_size=10),  # no digit at all: never a number
    _WRONG_TYPES,
)
_CONTROL = st.characters(categories=["Cc"])


def _bad_text(pattern_chars: str | None, max_size: int) -> st.SearchStrategy[Any]:
    """Strings a field with ``max_size`` (and, if given, only ``pattern_chars``) refuses."""
    options = [
        st.just(""),
        st.text(st.sampled_from(" \t\n"), min_size=1, max_size=5),  # blank once stripped
        st.integers(1, 3).map(lambda n: "x" * (max_size + n)),  # too long
        st.just("x" * 1_000_000),  # huge
        _WRONG_TYPES,
        st.integers(),
    ]
    if pattern_chars is not None:
        outside = _ANY_CHAR.filter(lambda c: c not in pattern_chars and not c.isspace())
        options.append(st.tuples(st.text(pattern_chars, min_size=1, max_size=5), outside).map("".join))
        options.append(st.tuples(st.just("a"), _CONTROL, st.just("b")).map("".join))
    return st.one_of(*options)


BAD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "customer_id": _bad_text("".join(chr(c) for c in range(0x20, 0x7F)), 100),
    "sku": _bad_text(_SKU_CHARS, 64),
    "quantity": st.one_of(_BAD_INTS, st.integers(min_value=10_001)),
    "amount_cents": st.one_of(_BAD_INTS, st.integers(min_value=100_000_001)),
    "currency": st.one_of(st.sampled_from(["eur", "EURO", "E1R", "", "€€€"]), _WRONG_TYPES),
    "card": st.one_of(st.sampled_from(["4242", "4242 4242 4242 4242", "x" * 16, "4" * 20]), _WRONG_TYPES),
    "address": _bad_text(None, 500),
    "callback_url": st.one_of(
        st.sampled_from(["ftp://x", "javascript:alert(1)", "example.com"]),
        st.just("https://x/" + "a" * 2000),
        st.integers(),
    ),
}
REQUIRED = ("customer_id", "sku", "quantity", "amount_cents", "address")
PREORDER_FIELDS = tuple(f for f in BAD_VALUES if f != "address")


@st.composite
def invalid_orders(draw: st.DrawFn, preorder: bool = False) -> tuple[dict[str, Any], str, str]:
    """(payload, the one field that is wrong, how): a valid order with one defect."""
    order = draw(valid_orders(preorder=preorder))
    how = draw(st.sampled_from(["bad value", "missing", "extra"]))
    fields = PREORDER_FIELDS if preorder else tuple(BAD_VALUES)
    if how == "missing":
        field = draw(st.sampled_from([f for f in REQUIRED if f in fields]))
        del order[field]
    elif how == "extra":
        field = draw(
            st.text(string.ascii_lowercase + "_", min_size=1, max_size=20).filter(lambda f: f not in BAD_VALUES)
        )
        order[field] = draw(st.one_of(st.integers(), st.text(max_size=20), st.none()))
    else:
        field = draw(st.sampled_from(fields))
        order[field] = draw(BAD_VALUES[field])
    return order, field, how


# --- task ids -------------------------------------------------------------------------

valid_task_ids = st.tuples(st.sampled_from(_ID_FIRST), st.text(_ID_REST, max_size=127)).map("".join)


@st.composite
def invalid_task_ids(draw: st.DrawFn, max_size: int = 300) -> str:
    kind = draw(st.sampled_from(["empty", "bad first", "bad char", "too long", "control"]))
    if kind == "empty":
        return ""
    if kind == "bad first":
        return draw(st.sampled_from("._:- ")) + draw(st.text(_ID_REST, max_size=20))
    if kind == "too long":
        return draw(valid_task_ids.filter(bool)) + "x" * draw(st.integers(129, max_size))
    char = draw(_CONTROL) if kind == "control" else draw(_ANY_CHAR.filter(lambda c: c not in _ID_REST))
    head = draw(valid_task_ids)[:60]
    return head + char + draw(st.text(_ID_REST, max_size=10))


def draw_examples(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` distinct-ish examples of ``strategy``, reproducibly (derandomized)."""
    drawn: list[T] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn[:count]
