"""What an HttpCall declaration refuses when its module loads: each with one line naming the rule."""

from __future__ import annotations

import pytest

from sas.api import Const, HttpCall, Input, Service, StepResultModel


class Done(StepResultModel):
    done_id: str


ROOMS = Service("rooms")


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"method": "POST", "path": "/bookings/{id}", "action": "x"}, "params= \\[\\] differ"),
        ({"method": "POST", "path": "/bookings", "params": {"id": Input("a")}}, "differ"),
        ({"method": "GET", "path": "/bookings", "body": {"a": Input("a")}}, "a GET sends no body"),
        ({"method": "POST", "path": "/bookings", "headers": {"Authorization": Const("x")}}, "not one sas sets"),
        ({"method": "POST", "path": "/bookings", "headers": {"Idempotency-Key": Const("x")}}, "not one sas sets"),
        ({"method": "POST", "path": "/bookings", "headers": {"bad header": Const("x")}}, "a header name"),
        ({"method": "POST", "path": "/bookings", "query": {"a b": Const("x")}}, "query parameter"),
        ({"method": "POST", "path": "/bookings", "pick": {"nope": "data.id"}}, "name a field of Done"),
        ({"method": "POST", "path": "/bookings", "pick": {"done_id": "data..id"}}, "where it is in the answer"),
        ({"method": "POST", "path": "/bookings/{id}", "params": {"id": Input("a")}}, "an action is"),
        ({"method": "HEAD", "path": "/bookings"}, "use GET, POST"),
    ],
)
def test_a_declaration_that_cannot_work_is_refused(kwargs: dict, said: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=said):
        HttpCall(ROOMS, result=Done, **kwargs)


def test_a_nested_answer_is_picked_into_the_result() -> None:
    call = HttpCall(ROOMS, "POST", "/bookings", result=Done, pick={"done_id": "data.items.1.id"})
    assert call.picked({"data": {"items": [{"id": "a"}, {"id": "b"}]}}) == {"done_id": "b"}
    assert call.picked({"data": {}}) == {"done_id": None}  # absent: the result model refuses it
    assert HttpCall(ROOMS, "POST", "/bookings", result=Done).picked({"done_id": "x"}) == {"done_id": "x"}
