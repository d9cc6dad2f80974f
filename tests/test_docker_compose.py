"""Static checks of docker-compose.yml, Dockerfile and .dockerignore.

There may be no Docker engine where the tests run, so the stack is never
started here: the compose file is validated against the Compose Specification's
schema and checked for what would otherwise only break at ``docker compose up``
time - missing services, a start order that cannot be satisfied, settings names
sas does not read, files the image does not have, plaintext secrets, floating
image tags - and for each "safe by default" property: ports bound to
loopback, one database role per user and none for the services that need no
database, encryption keys from a secret, the codec server wired to the UI, and a
healthcheck per process that tests that process. The deploy/ scripts are run
here too; the roles the init script makes are tried on a real PostgreSQL in
tests/test_compose_postgres_roles.py.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="pip install pyyaml (in the `test` extra)")

REPO = Path(__file__).resolve().parents[1]

COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

REQUIRED_SERVICES = {
    "postgresql",
    "temporal",
    "temporal-ui",
    "migrate",
    "worker",
    "supervisor",
    "remote-services",
}
APP_SERVICES = ("migrate", "remote-services", "worker", "supervisor")
CONDITIONS = {"service_healthy", "service_completed_successfully"}
SECRET_KEY = re.compile(r"PASSWORD|PASSWD|PWD|SECRET|TOKEN|API_KEY", re.IGNORECASE)
REQUIRED_VAR = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]*\}$")
INTERPOLATION = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?:(?::?[-?+])[^}]*)?\}")


# ------------------------------------------------------------------ helpers


def load_compose() -> dict[str, Any]:
    assert COMPOSE_FILE.is_file(), f"{COMPOSE_FILE} is missing"
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml must be a YAML mapping"
    assert isinstance(data.get("services"), dict), "docker-compose.yml has no `services:` mapping"
    return data


COMPOSE = load_compose()
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


def depends_on(service: dict[str, Any]) -> dict[str, Any]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):  # short form: no conditions
        return {name: {} for name in deps}
    return deps


def one_shot_services() -> set[str]:
    """Services something waits on to *complete*: jobs, not daemons."""
    return {
        name
        for service in SERVICES.values()
        for name, spec in depends_on(service).items()
        if (spec or {}).get("condition") == "service_completed_successfully"
    }


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def command_argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    if command is None:
        return []
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    # `sh -c "a && b"`: look at the script's words.
    if len(argv) >= 3 and argv[0] in {"sh", "bash", "/bin/sh", "/bin/bash"} and argv[1] == "-c":
        return shlex.split(argv[2])
    return argv


def strings_in(node: Any) -> typing.Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from strings_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings_in(item)


def secret_targets(service: dict[str, Any]) -> list[str]:
    """The file names a service's secrets get under /run/secrets."""
    targets = []
    for secret in service.get("secrets") or []:
        if isinstance(secret, str):
            targets.append(secret)
        else:
            targets.append(str(secret.get("target") or secret["source"]))
    return targets


def secret_sources(service: dict[str, Any]) -> list[str]:
    return [secret if isinstance(secret, str) else str(secret["source"]) for secret in service.get("secrets") or []]


def healthcheck_words(service: dict[str, Any]) -> list[str]:
    test = (service.get("healthcheck") or {}).get("test") or []
    if isinstance(test, str):
        return shlex.split(test)
    words = [str(word) for word in test]
    return words[1:] if words and words[0] in {"CMD", "CMD-SHELL"} else words


def option_values(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == option]


def dockerfile_cmd() -> list[str]:
    text = DOCKERFILE.read_text()
    cmds = re.findall(r"^CMD\s+(.+)$", text, flags=re.MULTILINE)
    assert cmds, "the Dockerfile has no CMD"
    last = cmds[-1].strip()
    if last.startswith("["):
        return [str(part) for part in json.loads(last)]
    return shlex.split(last)


def referenced_paths(argv: list[str]) -> list[str]:
    """Repo paths a ``python ...`` command line needs: scripts and ``-m`` modules (a module of an
    example's package, which the Dockerfile installs too, from its folder in ``examples/``)."""
    needed: list[str] = []
    for i, word in enumerate(argv):
        if not re.fullmatch(r"python(3(\.\d+)?)?", Path(word).name):
            continue
        rest = argv[i + 1 :]
        if rest[:1] == ["-m"] and len(rest) > 1:
            module = rest[1].replace(".", "/")
            top = module.split("/", 1)[0]
            home = next((d.relative_to(REPO) for d in sorted(REPO.glob("examples/*")) if (d / top).is_dir()), None)
            module = module if home is None else f"{home.as_posix()}/{module}"
            if (REPO / module).is_dir() or not (REPO / f"{module}.py").exists():
                needed.append(f"{module}/__main__.py")  # `python -m package` runs its __main__
            else:
                needed.append(f"{module}.py")
        elif rest and rest[0].endswith(".py"):
            needed.append(rest[0])
    return needed


def sas_subcommands(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "sas" and not argv[i + 1].startswith("-")]


def dockerignore_patterns() -> list[str]:
    if not DOCKERIGNORE.exists():
        return []
    lines = (line.strip() for line in DOCKERIGNORE.read_text().splitlines())
    return [line.rstrip("/") for line in lines if line and not line.startswith("#")]


def ignored_by_docker(rel_path: str) -> bool:
    """Rough .dockerignore matching: a path is out if it or a parent matches a pattern."""
    parts = Path(rel_path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in dockerignore_patterns():
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").lstrip("/")
        bare = pattern[3:] if pattern.startswith("**/") else None
        for candidate in candidates:
            if fnmatch.fnmatch(candidate, pattern) or (
                bare is not None and any(fnmatch.fnmatch(part, bare) for part in Path(candidate).parts)
            ):
                excluded = not negate
    return excluded


def resolve_setting(key: str) -> str | None:
    """None if ``key`` (an SAS_ env var) names a field of settings.Settings, else why not."""
    from pydantic import BaseModel

    from sas import settings

    def as_model(annotation: Any) -> type[BaseModel] | None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            for arg in typing.get_args(annotation):
                model = as_model(arg)
                if model is not None:
                    return model
        return None

    parts = key.removeprefix("SAS_").lower().split("__")
    model: type[BaseModel] = settings.Settings
    for depth, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            return f"{model.__name__} has no field {part!r} (known: {sorted(fields)})"
        if model is settings.Settings and part == "steps":
            return None  # a dict keyed by step name: anything below is a step's policy
        if depth == len(parts) - 1:
            return None
        nested = as_model(fields[part].annotation)
        if nested is None:
            return f"{model.__name__}.{part} is not a nested settings group, so {key} cannot go deeper"
        model = nested
    return None


# -------------------------------------------------------------------- tests


def test_required_services_exist() -> None:
    missing = REQUIRED_SERVICES - SERVICES.keys()
    assert not missing, f"docker-compose.yml lacks services: {sorted(missing)}"


def test_every_long_running_service_has_a_healthcheck() -> None:
    one_shots = one_shot_services() | {"migrate"}
    problems = []
    for name, service in SERVICES.items():
        if name in one_shots:
            continue
        check = service.get("healthcheck") or {}
        if check.get("disable") or not check.get("test"):
            problems.append(name)
    assert not problems, f"long-running services without a healthcheck `test`: {problems}"


def test_depends_on_uses_conditions_on_existing_services() -> None:
    problems = []
    for name, service in SERVICES.items():
        if isinstance(service.get("depends_on"), list):
            problems.append(f"{name}: depends_on is a plain list (no `condition:`): it only orders container creation")
            continue
        for dep, spec in depends_on(service).items():
            condition = (spec or {}).get("condition")
            if dep not in SERVICES:
                problems.append(f"{name} depends on unknown service {dep!r}")
            elif condition not in CONDITIONS:
                problems.append(f"{name} -> {dep}: condition {condition!r}, expected one of {sorted(CONDITIONS)}")
            elif condition == "service_healthy" and not (SERVICES[dep].get("healthcheck") or {}).get("test"):
                problems.append(f"{name} waits for {dep} to be healthy, but {dep} has no healthcheck")
    assert not problems, "bad depends_on:\n" + "\n".join(problems)


def test_no_dependency_cycle() -> None:
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "visiting"
        for dep in depends_on(SERVICES.get(name, {})):
            if state.get(dep) == "visiting":
                raise AssertionError(f"dependency cycle: {' -> '.join([*path, name, dep])}")
            if dep not in state and dep in SERVICES:
                visit(dep, [*path, name])
        state[name] = "done"

    for name in SERVICES:
        if name not in state:
            visit(name, [])


@pytest.mark.parametrize("name", ["worker", "supervisor"])
def test_workers_wait_for_migrate_to_complete(name: str) -> None:
    spec = depends_on(SERVICES.get(name, {})).get("migrate") or {}
    assert spec.get("condition") == "service_completed_successfully", (
        f"{name} must wait for `migrate` with condition service_completed_successfully "
        f"(got {spec.get('condition')!r}): otherwise it can start against an unmigrated state store"
    )


def test_one_shot_jobs_are_not_restarted() -> None:
    assert str(SERVICES.get("migrate", {}).get("restart")) == "no", 'migrate must have restart: "no"'
    wrong = {
        name: SERVICES[name].get("restart")
        for name in one_shot_services()
        if name in SERVICES and str(SERVICES[name].get("restart", "no")) != "no"
    }
    assert not wrong, f'one-shot services others wait to complete must have restart: "no": {wrong}'


def check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with the Compose Specification's schema it ships (vendor.compose-spec)."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_file_validates_against_the_compose_spec() -> None:
    result = check_compose_schema(COMPOSE_FILE)
    assert result.returncode == 0, f"docker-compose.yml is not a valid compose file:\n{result.stdout}{result.stderr}"


def test_the_schema_check_rejects_what_compose_would(tmp_path: Path) -> None:
    """The validator is live: a misspelt key and a value outside its enum both fail it."""
    typo = COMPOSE_FILE.read_text().replace("    healthcheck:\n", "    healthchek:\n", 1)
    bad_value = COMPOSE_FILE.read_text().replace("condition: service_healthy", "condition: service_happy", 1)
    for name, text in (("typo.yml", typo), ("bad_value.yml", bad_value)):
        assert text != COMPOSE_FILE.read_text(), f"{name}: the edit did not apply"
        (tmp_path / name).write_text(text)
        result = check_compose_schema(tmp_path / name)
        assert result.returncode != 0, f"{name} passed the schema check"


def test_restart_values_are_strings() -> None:
    wrong = {n: s["restart"] for n, s in SERVICES.items() if "restart" in s and not isinstance(s["restart"], str)}
    assert not wrong, f'quote restart values (restart: "no" - bare no is a boolean): {wrong}'


def test_migrate_runs_migrations_then_setup() -> None:
    argv = command_argv(SERVICES.get("migrate", {}))
    assert sas_subcommands(argv)[:2] == ["migrate", "setup"], (
        f"migrate should run `sas migrate && sas setup`, runs {argv}"
    )


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_build_from_the_dockerfile(name: str) -> None:
    build = SERVICES.get(name, {}).get("build")
    assert build, f"{name} has no `build:`: it must be built from the project's Dockerfile"
    context = REPO / (build if isinstance(build, str) else build.get("context", "."))
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert context.resolve() == REPO, f"{name} builds from {context}, expected the repo root"
    assert (context / dockerfile).is_file(), f"{name} builds from {context / dockerfile}, which does not exist"


def test_dockerfile_shape() -> None:
    text = DOCKERFILE.read_text()
    base = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    assert base and base[0].startswith("python:3.11-slim"), f"expected a python:3.11-slim base, got {base}"
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users and users[-1] not in {"root", "0", "0:0"}, "the image must run as a non-root USER"
    assert re.search(r"^WORKDIR\s+/app\s*$", text, flags=re.MULTILINE), "WORKDIR /app expected"
    assert re.search(r"pip install --no-cache-dir[^\n]*\s\.(\s|$)", text), "the project must be pip-installed"
    assert dockerfile_cmd() == ["python", "worker.py"], f"default CMD should be python worker.py, is {dockerfile_cmd()}"


@pytest.mark.parametrize("name", ["dockerfile-cmd", *APP_SERVICES])
def test_commands_reference_files_that_exist(name: str) -> None:
    argv = dockerfile_cmd() if name == "dockerfile-cmd" else command_argv(SERVICES.get(name, {}))
    assert argv, f"{name} has no command"
    needed = referenced_paths(argv)
    missing = [path for path in needed if not (REPO / path).exists()]
    assert not missing, f"{name} runs {argv}, but the repo lacks {missing}"
    out_of_image = [path for path in needed if ignored_by_docker(path)]
    assert not out_of_image, f"{name} needs {out_of_image}, which .dockerignore keeps out of the image"


def test_sas_subcommands_used_exist() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("scripts", {})
    used = sorted({sub for service in SERVICES.values() for sub in sas_subcommands(command_argv(service))})
    if not used:
        return
    assert "sas" in scripts, "compose runs `sas ...` but pyproject.toml declares no `sas` console script"
    module_name = scripts["sas"].partition(":")[0]
    module_file = REPO / (module_name.replace(".", "/") + ".py")
    assert module_file.is_file(), f"the `sas` script points at {scripts['sas']}, but {module_file} does not exist"

    import importlib

    module = importlib.import_module(module_name)
    app = getattr(module, "app", None)
    if app is None or not hasattr(app, "registered_commands"):
        pytest.skip(f"{module_name} has no typer `app` to read the commands from")
    known = {
        command.name or command.callback.__name__.replace("_", "-")
        for command in app.registered_commands
        if command.name or command.callback
    } | {group.name for group in app.registered_groups if group.name}
    # The commands whose modules load only when asked for (sas.cli.commands).
    known |= set(getattr(importlib.import_module("sas.cli.commands"), "COMMAND_MODULES", {}))
    missing = [sub for sub in used if sub not in known]
    assert not missing, (
        f"compose runs `sas {' / '.join(missing)}`, which {module_name} does not define (has {sorted(known)})"
    )


def test_sas_environment_keys_are_real_settings() -> None:
    problems = []
    for name, service in SERVICES.items():
        for key in environment(service):
            if key.startswith("SAS_"):
                why = resolve_setting(key)
                if why:
                    problems.append(f"{name}: {key}: {why}")
    assert not problems, "environment variables sas would silently ignore:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", ["migrate", "worker", "supervisor", "codec-server"])
def test_app_environment_validates_as_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    from sas import settings

    for key in [k for k in os.environ if k.startswith("SAS_")]:
        monkeypatch.delenv(key)
    service = SERVICES.get(name, {})
    env = {k: INTERPOLATION.sub("x", v) for k, v in environment(service).items() if k.startswith("SAS_")}
    # What deploy/env-from-secrets.sh adds: each SAS_* secret, here a key for the id "x".
    for target in secret_targets(service):
        env[target] = json.dumps({"x": base64.b64encode(os.urandom(32)).decode()})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loaded = settings.Settings(_env_file=None)  # type: ignore[call-arg]
    if name == "codec-server":
        assert loaded.encryption.enabled and loaded.encryption.current_key_id == "x"
        return
    assert "SAS_DATABASE__URL" in env and "SAS_TEMPORAL__ADDRESS" in env, (
        f"{name} lacks the database / Temporal settings"
    )
    assert loaded.database.url.startswith("postgresql+asyncpg://"), "the stack's state store should be PostgreSQL"


def test_app_addresses_point_at_services() -> None:
    problems = []
    for name in ("migrate", "worker", "supervisor"):
        env = environment(SERVICES.get(name, {}))
        targets = {
            "SAS_TEMPORAL__ADDRESS": env.get("SAS_TEMPORAL__ADDRESS", "").rpartition(":")[0],
            "SAS_SERVICES__URL": re.sub(r"^https?://([^/:]+).*$", r"\1", env.get("SAS_SERVICES__URL", "")),
            "SAS_DATABASE__URL": re.sub(r"^.*@([^/:]+).*$", r"\1", env.get("SAS_DATABASE__URL", "")),
        }
        for key, host in targets.items():
            if key in env and host not in SERVICES:
                problems.append(f"{name}: {key} points at host {host!r}, which is not a compose service")
    for name in ("worker", "supervisor"):
        env = environment(SERVICES.get(name, {}))
        missing = {"SAS_TEMPORAL__ADDRESS", "SAS_SERVICES__URL", "SAS_DATABASE__URL"} - env.keys()
        if missing:
            problems.append(f"{name} lacks {sorted(missing)}")
    assert not problems, "\n".join(problems)


def test_secrets_are_required_variables_not_literals() -> None:
    problems = []
    for name, service in SERVICES.items():
        for key, value in environment(service).items():
            if SECRET_KEY.search(key) and not REQUIRED_VAR.match(value):
                problems.append(f"{name}: {key} must be ${{VAR:?message}}, is {value!r}")
    for text in strings_in(COMPOSE):
        for credentials in re.findall(r"://[^/\s:@]+:([^@\s]+)@", text):
            if not REQUIRED_VAR.match(credentials):
                problems.append(f"URL carries a literal password: {text!r}")
    assert not problems, "\n".join(problems)


def test_dollar_signs_are_interpolations_or_escaped() -> None:
    """A lone ``$x`` is interpolated by compose, not by the container's shell: it must be ``$$x``."""
    stray = []
    for text in strings_in(COMPOSE):
        rest = INTERPOLATION.sub("", text.replace("$$", ""))
        if "$" in rest:
            stray.append(text)
    assert not stray, f"unescaped `$` (use `$$` for the shell): {stray}"


# The newest tags when this file was last reviewed: an image older than these is a
# downgrade. (Offline, "current" can only mean "not older than what we last saw".)
CURRENT_AT_LEAST = {
    "temporalio/server": (1, 32, 1),
    "temporalio/admin-tools": (1, 32, 1),
    "temporalio/ui": (2, 55, 0),
    "postgres": (17, 11),
}
SUPPORTED_POSTGRES_MAJORS = {16, 17}  # what Temporal's postgres12 plugin is run against upstream


def image_parts(image: str) -> tuple[str, str]:
    name, _, tag = image.partition("@")[0].rpartition(":") if ":" in image.rpartition("/")[2] else (image, "", "")
    return name, tag


def test_images_are_pinned_to_full_versions() -> None:
    problems = []
    for name, service in SERVICES.items():
        image = service.get("image")
        if image is None:
            if not service.get("build"):
                problems.append(f"{name}: neither image nor build")
            continue
        _, tag = image_parts(image)
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", tag):
            problems.append(f"{name}: {image!r} is not pinned to a full version tag (x.y or x.y.z)")
    assert not problems, "\n".join(problems)


def test_images_are_current() -> None:
    seen: dict[str, set[str]] = {}
    for service in SERVICES.values():
        repo, tag = image_parts(service.get("image") or "")
        if repo in CURRENT_AT_LEAST:
            seen.setdefault(repo, set()).add(tag)
    assert seen.keys() == CURRENT_AT_LEAST.keys(), f"expected images {sorted(CURRENT_AT_LEAST)}, found {sorted(seen)}"
    problems = []
    for repo, tags in seen.items():
        if len(tags) != 1:
            problems.append(f"{repo}: one version everywhere, found {sorted(tags)}")
        for tag in tags:
            version = tuple(int(part) for part in tag.split("."))
            if version < CURRENT_AT_LEAST[repo]:
                problems.append(f"{repo}:{tag} is older than {'.'.join(map(str, CURRENT_AT_LEAST[repo]))}")
    # The schema job must migrate to the schema the server expects.
    if seen.get("temporalio/server") != seen.get("temporalio/admin-tools"):
        problems.append(f"server {seen.get('temporalio/server')} != admin-tools {seen.get('temporalio/admin-tools')}")
    postgres = next(iter(seen.get("postgres", {"0"})))
    if int(postgres.split(".")[0]) not in SUPPORTED_POSTGRES_MAJORS:
        problems.append(f"postgres:{postgres}: use a major in {sorted(SUPPORTED_POSTGRES_MAJORS)}")
    assert not problems, "\n".join(problems)


def published_ports(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host ip, host port, container port) of each published port; host ip "" if unbound."""
    found = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            found.append((str(port.get("host_ip", "")), str(port.get("published", "")), str(port.get("target", ""))))
            continue
        parts = str(port).split("/")[0].rsplit(":", 2)
        if len(parts) == 3:
            found.append((parts[0].strip("[]"), parts[1], parts[2]))
        elif len(parts) == 2:
            found.append(("", parts[0], parts[1]))
        else:  # a bare container port: a random host port on every interface
            found.append(("", "", parts[0]))
    return found


def test_host_ports_are_unique() -> None:
    seen: dict[str, str] = {}
    clashes = []
    for name, service in SERVICES.items():
        for _, published, _ in published_ports(service):
            if published in seen:
                clashes.append(f"{published}: {seen[published]} and {name}")
            seen[published] = name
    assert not clashes, f"host ports published twice: {clashes}"
    assert seen.get("8233") == "temporal-ui", "the Temporal UI should be on http://localhost:8233"
    assert seen.get("7233") == "temporal", "Temporal's frontend should be on localhost:7233 for `sas` on the host"
    assert seen.get("8234") == "codec-server", "the codec server should be on http://localhost:8234"


def test_volumes_are_named_and_declared() -> None:
    declared = set((COMPOSE.get("volumes") or {}).keys())
    problems = []
    for name, service in SERVICES.items():
        for volume in service.get("volumes") or []:
            source = volume.get("source") if isinstance(volume, dict) else str(volume).split(":", 1)[0]
            if ":" not in str(volume) and not isinstance(volume, dict):
                problems.append(f"{name}: anonymous volume {volume!r}")
            elif source and not source.startswith((".", "/", "~")) and source not in declared:
                problems.append(f"{name}: volume {source!r} is not declared under top-level `volumes:`")
    assert "pgdata" in declared or any(
        "/var/lib/postgresql/data" in str(v) for v in SERVICES.get("postgresql", {}).get("volumes") or []
    ), "PostgreSQL data must live on a volume"
    assert not problems, "\n".join(problems)


def test_namespace_job_creates_the_namespace_sas_uses() -> None:
    namespace = environment(SERVICES.get("worker", {})).get("SAS_TEMPORAL__NAMESPACE", "default")
    creators = [
        name
        for name, service in SERVICES.items()
        if "namespace create" in " ".join(map(str, service.get("command") or []))
        or "namespace create" in str(service.get("command") or "")
    ]
    if not creators:
        pytest.skip("no namespace job: the Temporal image is expected to create the namespace itself")
    text = " ".join(str(part) for part in SERVICES[creators[0]].get("command") or [])
    assert re.search(rf"--namespace\s+{re.escape(namespace)}\b", text), (
        f"{creators[0]} should create namespace {namespace!r} (SAS_TEMPORAL__NAMESPACE)"
    )


def test_dockerignore_keeps_tests_and_local_state_out() -> None:
    assert DOCKERIGNORE.is_file(), ".dockerignore is missing: the whole repo (.git, .sas, tests) would be sent"
    for path in (".git", ".sas", ".venv", "tests", "bench", ".env", "pkg/__pycache__", "secrets/SAS_ENCRYPTION__KEYS"):
        assert ignored_by_docker(path), f".dockerignore should exclude {path}"
    for path in (
        "pyproject.toml",
        "worker.py",
        "sas/settings/root.py",
        "supervisor/__main__.py",
        "sas/state_store/alembic.ini",
        "deploy/env-from-secrets.sh",
    ):
        assert not ignored_by_docker(path), f".dockerignore must not exclude {path}: the image needs it"


# ------------------------------------------------- safe by default

DEPLOY = REPO / "deploy"
INIT_DIR = DEPLOY / "postgres-init"
ROLE_SCRIPT = INIT_DIR / "10-roles.sh"
ENTRYPOINT_SCRIPT = DEPLOY / "env-from-secrets.sh"
NEW_SECRETS_SCRIPT = DEPLOY / "new-secrets.sh"
# Who may hold database credentials, and as which role.
DB_ROLES = {
    "temporal-schema": "temporal",
    "temporal": "temporal",
    "migrate": "sas_migrate",
    "worker": "sas_app",
    "supervisor": "sas_app",
}
KEY_SECRET_TARGET = "SAS_ENCRYPTION__KEYS"


def test_every_published_port_is_bound_to_loopback() -> None:
    unbound = [
        f"{name}: {ip or '0.0.0.0'}:{published or '<random>'} -> {target}"
        for name, service in SERVICES.items()
        for ip, published, target in published_ports(service)
        if ip != "127.0.0.1"
    ]
    assert not unbound, f"ports reachable from the network (bind them to 127.0.0.1): {unbound}"
    assert any(published_ports(s) for s in SERVICES.values()), "no published port at all: nothing to check"


def database_credentials(service: dict[str, Any]) -> list[str]:
    """Every place a service's definition carries database credentials or a database URL."""
    env = environment(service)
    found = [f"env {k}" for k in env if re.search(r"DATABASE|POSTGRES|SQL_|_DB_", k)]
    found += [f"url {t!r}" for t in strings_in(service) if re.search(r"postgres(ql)?(\+\w+)?://", t)]
    return found


def test_only_the_services_that_need_a_database_get_credentials() -> None:
    holders = {name for name, service in SERVICES.items() if database_credentials(service)}
    expected = set(DB_ROLES) | {"postgresql"}
    assert holders == expected, (
        f"database credentials held by {sorted(holders - expected)} (should have none), "
        f"missing from {sorted(expected - holders)}"
    )
    for name in ("remote-services", "codec-server", "temporal-ui", "temporal-namespace"):
        assert "SAS_DATABASE__URL" not in environment(SERVICES[name]), f"{name} must get no database URL"


def test_each_user_connects_as_its_own_role_never_the_superuser() -> None:
    problems = []
    for name, role in DB_ROLES.items():
        service = SERVICES[name]
        env = environment(service)
        users = set(re.findall(r"://([^:/@]+):", env.get("SAS_DATABASE__URL", "")))
        if "POSTGRES_USER" in env:
            users.add(env["POSTGRES_USER"])
        users |= set(option_values(command_argv(service), "-u"))
        for text in strings_in(service.get("command") or []):
            users |= set(re.findall(r"\s-u\s+(\w+)", text))
        if users != {role}:
            problems.append(f"{name} connects as {sorted(users)}, expected only {role!r}")
        if "POSTGRES_PASSWORD" in json.dumps(service):
            problems.append(f"{name} has the superuser's password")
    superuser_password = [n for n, s in SERVICES.items() if n != "postgresql" and "POSTGRES_PASSWORD" in json.dumps(s)]
    assert not superuser_password, f"only postgresql may see POSTGRES_PASSWORD: {superuser_password}"
    assert not problems, "\n".join(problems)


def test_the_role_init_script_is_mounted_and_creates_the_roles() -> None:
    postgres = SERVICES["postgresql"]
    mounts = [str(v) for v in postgres.get("volumes") or []]
    assert "./deploy/postgres-init:/docker-entrypoint-initdb.d:ro" in mounts, f"init scripts not mounted: {mounts}"
    # The image *sources* a .sh that is not executable, running it inside its own shell.
    scripts = sorted(INIT_DIR.glob("*.sh"))
    assert scripts == [ROLE_SCRIPT], f"expected exactly {ROLE_SCRIPT.name} in {INIT_DIR}, found {scripts}"
    assert ROLE_SCRIPT.stat().st_mode & stat.S_IXUSR, f"{ROLE_SCRIPT} must be executable"
    text = ROLE_SCRIPT.read_text()
    for role in set(DB_ROLES.values()):
        assert f":-{role}}}" in text, f"{ROLE_SCRIPT.name} does not create role {role}"
    # Its passwords are handed to postgresql from .env, the same variables the users' URLs use.
    env = environment(postgres)
    for variable in re.findall(r"\$\{(\w+_DB_PASSWORD):\?", text):
        assert REQUIRED_VAR.match(env.get(variable, "")), f"postgresql must pass {variable} as ${{{variable}:?}}"
    assert "pg_isready -h 127.0.0.1" in " ".join(healthcheck_words(postgres)), (
        "postgresql's healthcheck must use TCP: the init-time server listens on the socket only"
    )


@pytest.mark.parametrize("script", [ROLE_SCRIPT, ENTRYPOINT_SCRIPT, NEW_SECRETS_SCRIPT], ids=lambda p: p.name)
def test_shell_scripts_parse(script: Path) -> None:
    shell = "bash" if script.read_text().startswith("#!/usr/bin/env bash") else "sh"
    result = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"{shell} -n {script.name}: {result.stderr}"


def test_encryption_keys_come_from_a_secret_file() -> None:
    declared = COMPOSE.get("secrets") or {}
    key_secrets = {n for n, spec in declared.items() if "SAS_ENCRYPTION__KEYS" in str(spec.get("file", ""))}
    assert len(key_secrets) == 1, f"expected one secret file for the encryption keys, got {declared}"
    [source] = key_secrets
    assert declared[source]["file"] == f"./secrets/{KEY_SECRET_TARGET}"
    problems = []
    for name, service in SERVICES.items():
        env = environment(service)
        if KEY_SECRET_TARGET in env:
            problems.append(f"{name}: keys in the environment instead of the secret")
        has_keys = source in secret_sources(service)
        if has_keys != (name in {"worker", "supervisor", "codec-server"}):
            problems.append(f"{name}: {'has' if has_keys else 'lacks'} the key secret")
        if has_keys:
            if KEY_SECRET_TARGET not in secret_targets(service):
                problems.append(f"{name}: mount the keys as /run/secrets/{KEY_SECRET_TARGET}")
            if service.get("entrypoint") != ["sh", "/app/deploy/env-from-secrets.sh"]:
                problems.append(f"{name}: the secret is read only by deploy/env-from-secrets.sh as the entrypoint")
            if not REQUIRED_VAR.match(env.get("SAS_ENCRYPTION__CURRENT_KEY_ID", "")):
                problems.append(f"{name}: SAS_ENCRYPTION__CURRENT_KEY_ID must be a required ${{VAR:?}}: encryption on")
    assert not problems, "\n".join(problems)
    assert "secrets/" in (REPO / ".gitignore").read_text().splitlines(), "secrets/ must be in .gitignore"
    assert ".env" in (REPO / ".gitignore").read_text().splitlines(), ".env must be in .gitignore"


def test_every_interpolated_variable_is_required() -> None:
    """No secret silently falls back to a default (or to empty)."""
    loose = sorted({m for t in strings_in(COMPOSE) for m in INTERPOLATION.findall(t) if not REQUIRED_VAR.match(m)})
    assert not loose, f"use ${{VAR:?message}}: {loose}"


def test_new_secrets_writes_what_compose_needs_and_the_entrypoint_loads_the_keys(tmp_path: Path) -> None:
    first = subprocess.run(["sh", str(NEW_SECRETS_SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert first.returncode == 0, first.stderr
    written = {p: p.read_bytes() for p in (tmp_path / ".env", tmp_path / "secrets" / KEY_SECRET_TARGET)}
    again = subprocess.run(["sh", str(NEW_SECRETS_SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0 and "left as it is" in again.stdout
    assert {p: p.read_bytes() for p in written} == written, "a second run must not replace secrets"

    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    # Readable by the container's user (Compose bind-mounts it with the host's mode).
    assert stat.S_IMODE((tmp_path / "secrets" / KEY_SECRET_TARGET).stat().st_mode) == 0o644

    dotenv = dict(
        line.split("=", 1) for line in (tmp_path / ".env").read_text().splitlines() if line and line[0] != "#"
    )
    required = {m.group(1) for t in strings_in(COMPOSE) for m in re.finditer(r"\$\{(\w+):\?", t)}
    assert required <= dotenv.keys(), f".env lacks {sorted(required - dotenv.keys())}"
    for key, value in dotenv.items():
        if key.endswith("PASSWORD"):
            assert re.fullmatch(r"[A-Za-z0-9_-]{32}", value), f"{key} is not a URL-safe 32-character password"

    # What a container does: the entrypoint exports the secret, and sas's settings take it.
    probe = (
        "from sas.settings import Settings; from sas.payload_codec import KeyRing; "
        "s = Settings(_env_file=None); r = KeyRing.from_settings(s.encryption); print(r.key_ids, r.current_key_id)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    loaded = subprocess.run(
        ["sh", str(ENTRYPOINT_SCRIPT), sys.executable, "-c", probe],
        env={
            **clean,
            "SAS_SECRETS_DIR": str(tmp_path / "secrets"),
            "SAS_ENCRYPTION__CURRENT_KEY_ID": dotenv["ENCRYPTION_CURRENT_KEY_ID"],
        },
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "['k1'] k1"


def test_the_codec_server_runs_and_the_ui_uses_it() -> None:
    from sas.settings import CodecServerSettings

    codec = SERVICES["codec-server"]
    argv = command_argv(codec)
    assert argv[:2] == ["sas", "codec-server"], f"codec-server should run `sas codec-server`, runs {argv}"
    [port] = option_values(argv, "--port")
    assert option_values(argv, "--host") == ["0.0.0.0"], "inside its container it must listen beyond loopback"
    published = {target: (ip, host_port) for ip, host_port, target in published_ports(codec)}
    assert published.get(port) == ("127.0.0.1", port), f"publish the codec server as 127.0.0.1:{port}:{port}"

    ui = SERVICES["temporal-ui"]
    endpoint = environment(ui).get("TEMPORAL_CODEC_ENDPOINT", "")
    assert endpoint == f"http://localhost:{port}", f"the UI's TEMPORAL_CODEC_ENDPOINT is {endpoint!r}"
    # The browser calls the endpoint from the UI's page: its origin must be allowed, and the
    # endpoint's host name must pass the codec server's Host check.
    [(_, ui_port, _)] = published_ports(ui)
    origins = set(option_values(argv, "--ui-origin"))
    assert origins == {f"http://localhost:{ui_port}", f"http://127.0.0.1:{ui_port}"}, origins
    assert "SAS_CODEC_SERVER__ALLOWED_HOSTS" not in environment(codec)
    assert "localhost" in CodecServerSettings().allowed_hosts and "127.0.0.1" in CodecServerSettings().allowed_hosts
    assert (depends_on(ui).get("codec-server") or {}).get("condition") == "service_healthy"


def test_each_process_has_a_healthcheck_that_tests_itself() -> None:
    expected_role = {"worker": "worker", "supervisor": "supervisor"}
    problems = []
    for name, service in SERVICES.items():
        words = healthcheck_words(service)
        text = " ".join(words)
        if name in expected_role:
            if words != ["sas", "health", expected_role[name]]:
                problems.append(f"{name}: healthcheck should be `sas health {expected_role[name]}`, is {words}")
            continue
        if not words:
            continue
        # A check may only talk to its own container.
        for other in SERVICES:
            if other != name and re.search(rf"(?<![\w-]){re.escape(other)}(?![\w-])", text):
                problems.append(f"{name}: healthcheck probes {other}: {text!r}")
        if "SAS_TEMPORAL__ADDRESS" in text or (":7233" in text and name != "temporal"):
            problems.append(f"{name}: healthcheck probes Temporal's port: {text!r}")
    for name in ("codec-server", "remote-services"):
        argv = command_argv(SERVICES[name])
        [port] = option_values(argv, "--port")
        text = " ".join(healthcheck_words(SERVICES[name]))
        if f"http://127.0.0.1:{port}/healthz" not in text:
            problems.append(f"{name}: healthcheck should GET its own /healthz on port {port}: {text!r}")
    assert not problems, "\n".join(problems)

    from sas.cli.commands import COMMAND_MODULES  # tests/cli/test_command_table.py holds it to the modules

    assert "health" in COMMAND_MODULES, "the healthchecks run `sas health`, which sas does not define"


def test_the_server_hands_out_a_backlog_by_fairness_key() -> None:
    """The compose server turns fairness on as the dev servers do (dev_server_flags): without it
    the tasks' fairness keys are taken and ignored."""
    from sas.task_models.search_attributes import FAIRNESS_CONFIG, dev_server_flags

    server = load_compose()["services"]["temporal"]
    path = server["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    config = next(c for c in server["configs"] if c["target"] == path)
    dynamic = yaml.safe_load(load_compose()["configs"][config["source"]]["content"])
    assert dynamic[FAIRNESS_CONFIG] == [{"value": True, "constraints": {}}]
    assert f"{FAIRNESS_CONFIG}=true" in dev_server_flags()
