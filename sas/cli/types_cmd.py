"""``sas types``: the registered task types, with their steps, the services they call and the
schema of their input - what ``sas submit --type T --input FILE`` takes."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli.output import command_line, console, print_json, shown, table


def register(app: typer.Typer) -> None:
    app.command("types")(types)


def types(
    task_type: str | None = typer.Argument(None, help="Show only this task type."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (with each input's JSON Schema)."),
) -> None:
    """List the registered task types: their steps, services and input fields; a broken one with
    the line that says why (the worker refuses to start with it). Exits 2 if one shown is broken."""
    from sas.cli.output import CliError
    from sas.workflows import registry

    found = registry.catalog(lenient=True)
    if task_type is not None and task_type not in found.types and task_type not in found.broken:
        raise CliError(
            f"no task type {task_type!r}", f"registered: {', '.join(found.types) or 'none'}; see `sas types`"
        )
    described = [describe(t) for name, t in found.types.items() if task_type in (None, name)]
    broken = [{"task_type": name, "broken": line} for name, line in found.broken.items() if task_type in (None, name)]
    if as_json:
        print_json(described + broken)
    elif not described and not broken:
        console.print("no task type is registered: install a package that names its module in the")
        console.print("sas.task_types entry point group, or set SAS_TASK_TYPES__MODULES (see the README)")
    else:
        for entry in described:
            _print(entry)
        for entry in broken:
            console.print(
                f"[bold]{shown(entry['task_type'])}[/bold] · broken: {shown(entry['broken'])}", highlight=False
            )
    if broken:
        raise typer.Exit(2)


def describe(task_type: Any) -> dict[str, Any]:
    """One registered task type as JSON: what ``sas types --json`` prints."""
    from sas.task_types.choices import Choice
    from sas.task_types.fan_out import ForEach
    from sas.task_types.services import HttpCall
    from sas.task_types.steps import ChildTask, StepDefinition
    from sas.workflows.summaries import task_summary

    definition = task_type.definition
    steps = []
    for step in definition.steps:
        entry: dict[str, Any] = {"name": step.name, "stage": definition.stage_of(step.name)}
        if isinstance(step, StepDefinition):
            entry |= {
                "kind": "http" if isinstance(step.forward, HttpCall) else "agent",
                "agent": step.agent,
                "undo": step.compensation,
                "service": step.agent.rpartition(".")[0],
            }
            if isinstance(step.forward, HttpCall):
                entry["call"] = f"{step.forward.method} {step.forward.path}"
            if isinstance(step.undo, HttpCall):
                entry["undo_call"] = f"{step.undo.method} {step.undo.path}"
            entry["reversal"] = reversal(definition, step)
            if isinstance(step, ForEach):
                entry["fan_out"] = fan_out(step)
        elif isinstance(step, ChildTask):
            entry |= {"kind": "child", "child_type": step.task_type, "child_workflow": step.workflow_type}
            entry["reversal"] = reversal(definition, step)
        else:
            entry |= {"kind": "wait", "signal": step.signal, "deadline_s": _seconds(step.deadline)}
            if step.signal is not None:
                entry["on_deadline"] = step.on_deadline
        path = definition.choice_path(step.name)
        if path is not None:
            entry["path_of_choice"] = path.label
        elif step.when is not None:
            entry["unless"] = step.when.unless
        steps.append(entry)
    return {
        "task_type": definition.task_type,
        "share": share(definition),
        "pivot": definition.pivot,
        "workflow_type": task_type.workflow_name,
        "module": task_type.module,
        "flow": task_summary(definition, "", {}).split(" · ")[-1],
        "shape": [shape(stage) for stage in definition.stages],
        "choices": [choice(stage) for stage in definition.stages if isinstance(stage, Choice)],
        "steps": steps,
        "services": sorted({s["service"] for s in steps if "service" in s}),
        "input_schema": definition.input_model.model_json_schema(),
    }


def share(definition: Any) -> dict[str, Any]:
    """Whose share of a backlog the type's tasks take: its team, where the fairness key comes
    from (``team``, ``<team>/<input field>``, ``<input field>``, or None: no key) and the team's
    weight (None: the server's default, 1); each task's priority is its own (``--priority``)."""
    from sas.settings import get_settings
    from sas.settings.teams import weight_of

    team, tenant = definition.team, definition.fairness_from
    key = team if tenant is None else (f"{team}/<{tenant}>" if team else f"<{tenant}>")
    weight = weight_of(get_settings().teams, team) if key is not None else None
    return {"team": team, "fairness_key": key, "weight": weight}


def shape(member: Any) -> Any:
    """A stage as JSON: a step's name, ``{"parallel": [...]}`` for a group (its members, started
    together), ``{"sequence": [...]}`` for a branch of one (its members, in order),
    ``{"choice": [...]}`` for one of several paths (``choice``)."""
    from sas.task_types.choices import Choice
    from sas.task_types.groups import Parallel, Sequence

    if isinstance(member, Choice):
        return {"choice": choice(member)["paths"]}
    if isinstance(member, Parallel):
        return {"parallel": [shape(m) for m in member.steps]}
    if isinstance(member, Sequence):
        return {"sequence": [shape(m) for m in member.steps]}
    return member.name


def choice(member: Any) -> dict[str, Any]:
    """A ``Choice`` as JSON: its paths in the order they are asked, each with its label
    (``otherwise`` last) and its shape."""
    return {"paths": [{"when": label, "path": shape(path)} for label, path in member.paths]}


def fan_out(step: Any) -> dict[str, Any]:
    """A fan-out's bounds, as ``sas types --json`` gives them."""
    return {
        "max_concurrency": step.max_concurrency,
        "batch_size": step.batch_size,
        "tolerate": {"count": step.tolerate.count, "percent": step.tolerate.percent},
    }


def reversal(definition: Any, step: Any) -> str:
    """What undoing its task does to a step: its undo runs (``undone``); or it is the pivot, the
    point of no return; forward only (after the pivot); read only; irreversible, and why."""
    role = definition.pivot_role(step.name)
    if role is not None:
        return "pivot: the point of no return" if role == "pivot" else "forward only: never undone"
    if getattr(step, "task_type", None) is not None:
        return "undone: its child task is undone"
    if step.read_only:
        return "read only: nothing to undo"
    if step.irreversible is not None:
        return f"irreversible: {step.irreversible}"
    return "undone"


def _seconds(value: Any) -> float | None:
    return None if value is None else value.total_seconds()


def _print(entry: dict[str, Any]) -> None:
    name = entry["task_type"]
    console.print(
        f"[bold]{shown(name)}[/bold] · {shown(entry['workflow_type'])} · {shown(entry['module'])}", highlight=False
    )
    console.print(f"  {shown(entry['flow'])}", highlight=False)
    fair = entry["share"]
    if fair["fairness_key"] is not None:
        weight = fair["weight"] if fair["weight"] is not None else "1 (default)"
        team = f"team {shown(fair['team'])}, " if fair["team"] else ""
        console.print(f"  {team}fairness key {shown(fair['fairness_key'])}, weight {weight}", highlight=False)
    for each in entry["choices"]:
        paths = " | ".join(f"{_names(p['path'])} ({p['when']})" for p in each["paths"])
        console.print(f"  one of: {shown(paths)}", highlight=False)
    for step in entry["steps"]:
        if "unless" in step:
            console.print(f"  {shown(step['name'])} only if so, else skipped: {shown(step['unless'])}", highlight=False)
    rows = []
    for step in entry["steps"]:
        if step["kind"] == "wait":
            calls = f"waits for {step['signal']}" if step.get("signal") else "waits until a time"
            rows.append([step["name"], calls, "", "", ""])
        elif step["kind"] == "child":
            calls = f"child task {step['child_type']} ({step['child_workflow']})"
            rows.append([step["name"], calls, "its child's undo", step["reversal"], ""])
        else:
            calls = step["agent"] + (f" ({step['call']})" if "call" in step else "")
            if "fan_out" in step:
                calls = f"for each item: {calls}, {step['fan_out']['max_concurrency']} at once"
            rows.append([step["name"], calls, step["undo"] or "", step["reversal"], step["service"]])
    console.print(table(None, ["step", "calls", "undo", "when undoing", "service"], rows))
    schema = entry["input_schema"]
    required = set(schema.get("required", []))
    fields = [
        [field, _type_of(spec), "yes" if field in required else "no"]
        for field, spec in schema.get("properties", {}).items()
    ]
    console.print(table(None, ["input field", "type", "required"], fields))
    command_line(f"  sas submit --type {name} --input {name}.json")
    console.print()


def _names(shaped: Any) -> str:
    """A path's steps, as the flow draws them."""
    if isinstance(shaped, str):
        return shaped
    if "sequence" in shaped:
        return " → ".join(_names(m) for m in shaped["sequence"])
    return " ‖ ".join(_names(m) for m in shaped["parallel"])


def _type_of(spec: dict[str, Any]) -> str:
    if "type" in spec:
        return str(spec["type"])
    options = [str(s.get("type", "?")) for s in spec.get("anyOf", [])]
    return " | ".join(options) or "any"
