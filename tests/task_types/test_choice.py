"""``Choice``: one of several paths, decided once from what came before it, laid out as its
paths' stages under their conditions, and refused when the type loads if it breaks a rule."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sas.task_types.checks import definition_problem
from sas.task_types.choices import Choice, Option
from sas.task_types.groups import Parallel, Sequence
from sas.task_types.services import Service
from sas.task_types.sources import Result
from sas.task_types.steps import StepContext, StepDefinition, When
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.summaries import task_details
from sas_orders.models import OrderInput
from sas_orders.steps import CHARGE, RESERVE, SHIP

RUSH, PACK, POST = (replace(SHIP, name=name) for name in ("rush", "pack", "post"))


def express(ctx: StepContext) -> bool:
    return bool(ctx.input.get("express"))


def heavy(ctx: StepContext) -> bool:
    return bool(ctx.input.get("heavy"))


def typed(*stages: Any, pivot: str | None = None) -> TaskDefinition:
    return TaskDefinition("chosen", OrderInput, (RESERVE, *stages), pivot=pivot)


DELIVERY = typed(
    Choice(Option("express delivery", when=express, then=RUSH), otherwise=Sequence(PACK, POST)),
    CHARGE,
)


def runs(definition: TaskDefinition, task_input: dict[str, Any], results: dict[str, Any] | None = None) -> list[str]:
    """The steps whose condition holds for this input and these results."""
    context = StepContext(input=task_input, results=results or {})
    return [s.name for s in definition.steps if s.when is None or s.when.predicate(context)]


def test_the_first_option_that_holds_is_the_path_taken_and_otherwise_when_none_does() -> None:
    three = typed(
        Choice(Option("express", when=express, then=RUSH), Option("heavy", when=heavy, then=PACK), otherwise=POST)
    )
    assert runs(three, {"express": True, "heavy": True}) == ["reserve", "rush"]
    assert runs(three, {"heavy": True}) == ["reserve", "pack"]
    assert runs(three, {}) == ["reserve", "post"]
    none = typed(Choice(Option("express", when=express, then=RUSH), Option("heavy", when=heavy, then=PACK)))
    assert runs(none, {}) == ["reserve"]


def test_a_path_s_own_results_never_move_its_later_steps_to_another_path() -> None:
    # Asked with every result, "no pack yet" would be false at post, after pack, and post would
    # be skipped halfway along its own path.
    def not_packed(ctx: StepContext) -> bool:
        return "pack" not in ctx.results

    definition = typed(Choice(Option("unpacked", when=not_packed, then=Sequence(PACK, POST)), otherwise=RUSH))
    assert runs(definition, {}, {"reserve": {}, "pack": {"ref": "p"}}) == ["reserve", "pack", "post"]


def test_the_scheduler_runs_the_paths_as_stages_and_a_skipped_step_says_which_path_it_was() -> None:
    assert [getattr(s, "name", s) for s in DELIVERY.run_stages] == ["reserve", "rush", "pack", "post", "charge"]
    assert definition_problem(DELIVERY) is None
    skipped = next(s for s in DELIVERY.steps if s.name == "rush")
    assert (
        skipped.when is not None and skipped.when.unless == "another path was chosen: this one is for express delivery"
    )
    post = next(s for s in DELIVERY.steps if s.name == "post")
    assert post.when is not None and "when no option holds" in post.when.unless
    page = task_details(DELIVERY, "t-1", {})
    assert "**rush**: `shipping.ship`" in page and "one path of a choice: express delivery" in page
    assert "**post**" in page and "one path of a choice: when no option holds" in page


def test_a_step_after_the_choice_may_use_a_path_s_result_but_no_path_another_s() -> None:
    assert DELIVERY.finished_before("charge") >= {"rush", "pack", "post"}
    assert DELIVERY.finished_before("post") == {"reserve", "pack"}
    assert DELIVERY.finished_before("pack") == {"reserve"}


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        (
            typed(Choice(Option("fast", when=express, then=RUSH), Option("fast", when=heavy, then=PACK))),
            "two options labelled alike",
        ),
        (
            typed(Choice(Option("fast", when=express, then=replace(RUSH, when=When(heavy, "light"))), otherwise=PACK)),
            "step 'rush': a step of a Choice's path (fast) runs when its path is chosen",
        ),
        (
            typed(Choice(Option("fast", when=express, then=RUSH), otherwise=PACK), pivot="rush"),
            "step 'rush': the pivot is in a path of a Choice (fast)",
        ),
        (
            typed(Choice(Option("fast", when=express, then=Sequence(RUSH, Sequence(PACK))), otherwise=POST)),  # type: ignore[arg-type]
            "a Sequence inside a Sequence",
        ),
    ],
    ids=["labels alike", "a condition of its own", "the pivot in a path", "a sequence in a path's sequence"],
)
def test_a_choice_that_breaks_a_rule_is_refused_naming_it(definition: TaskDefinition, problem: str) -> None:
    found = definition_problem(definition)
    assert found is not None and problem in found, found


def test_a_step_naming_a_result_of_another_path_is_refused() -> None:
    from sas.task_types.call_checks import calls_problem

    courier = Service("courier")
    assert SHIP.result is not None
    after_rush = StepDefinition(
        "label",
        forward=courier.post("/label", body={"rush": Result("rush", "tracking_id")}, result=SHIP.result),
        undo=courier.post("/label/undo", body={}, result=SHIP.result, action="label_undo"),
    )
    definition = typed(Choice(Option("fast", when=express, then=RUSH), otherwise=after_rush))
    found = calls_problem(definition)
    assert found is not None and "Result('rush', ...) must name a step that finishes before" in found, found


@pytest.mark.parametrize(
    "stages",
    [
        (Parallel(Choice(Option("fast", when=express, then=RUSH), otherwise=PACK), POST),),  # type: ignore[arg-type]
        (
            Choice(
                Option("fast", when=express, then=Choice(Option("x", when=heavy, then=RUSH), otherwise=PACK)),  # type: ignore[arg-type]
                otherwise=POST,
            ),
        ),
    ],
    ids=["in a parallel group", "in another choice"],
)
def test_a_choice_is_a_stage_of_its_own(stages: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="a Choice is a stage of its own"):
        typed(*stages)


def test_a_choice_has_two_or_more_paths_and_each_label_says_what_it_is_for() -> None:
    with pytest.raises(ValueError, match="two or more paths"):
        Choice(Option("fast", when=express, then=RUSH))
    with pytest.raises(ValueError, match="give a label of 1-80 characters"):
        Option("otherwise", when=express, then=RUSH)
