"""Static checks of docker-compose.yml, Dockerfile and .dockerignore.

There may be no Docker engine where the tests run, so the stack is never
started here: the compose file is parsed and checked for what would otherwise
only break at ``docker compose up`` time - missing services, a start order that
cannot be satisfied, settings names sas does not read, files the image does not
have, plaintext secrets, floating image tags.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="pip install pyyaml (in the `test` extra)")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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


def dockerfile_cmd() -> list[str]:
    text = DOCKERFILE.read_text()
    cmds = re.findall(r"^CMD\s+(.+)$", text, flags=re.MULTILINE)
    assert cmds, "the Dockerfile has no CMD"
    last = cmds[-1].strip()
    if last.startswith("["):
        import json

        return [str(part) for part in json.loads(last)]
    return shlex.split(last)


def referenced_paths(argv: list[str]) -> list[str]:
    """Repo paths a ``python ...`` command line needs: scripts and ``-m`` modules."""
    needed: list[str] = []
    for i, word in enumerate(argv):
        if not re.fullmatch(r"python(3(\.\d+)?)?", Path(word).name):
            continue
        rest = argv[i + 1 :]
        if rest[:1] == ["-m"] and len(rest) > 1:
            module = rest[1].replace(".", "/")
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

    import settings

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


# Service keys of the Compose Specification (compose-spec/schema/compose-spec.json).
COMPOSE_SERVICE_KEYS = {
    "develop",
    "deploy",
    "annotations",
    "attach",
    "build",
    "blkio_config",
    "cap_add",
    "cap_drop",
    "cgroup",
    "cgroup_parent",
    "command",
    "configs",
    "container_name",
    "cpu_count",
    "cpu_percent",
    "cpu_shares",
    "cpu_quota",
    "cpu_period",
    "cpu_rt_period",
    "cpu_rt_runtime",
    "cpus",
    "cpuset",
    "credential_spec",
    "depends_on",
    "device_cgroup_rules",
    "devices",
    "dns",
    "dns_opt",
    "dns_search",
    "domainname",
    "entrypoint",
    "env_file",
    "label_file",
    "environment",
    "expose",
    "extends",
    "external_links",
    "extra_hosts",
    "gpus",
    "group_add",
    "healthcheck",
    "hostname",
    "image",
    "init",
    "ipc",
    "isolation",
    "labels",
    "links",
    "logging",
    "mac_address",
    "mem_limit",
    "mem_reservation",
    "mem_swappiness",
    "memswap_limit",
    "network_mode",
    "networks",
    "oom_kill_disable",
    "oom_score_adj",
    "pid",
    "pids_limit",
    "platform",
    "ports",
    "post_start",
    "pre_stop",
    "privileged",
    "profiles",
    "pull_policy",
    "read_only",
    "restart",
    "runtime",
    "scale",
    "security_opt",
    "shm_size",
    "secrets",
    "sysctls",
    "stdin_open",
    "stop_grace_period",
    "stop_signal",
    "storage_opt",
    "tmpfs",
    "tty",
    "ulimits",
    "user",
    "uts",
    "userns_mode",
    "volumes",
    "volumes_from",
    "working_dir",
}
HEALTHCHECK_KEYS = {"disable", "interval", "retries", "test", "timeout", "start_period", "start_interval"}


def test_service_keys_are_compose_keys() -> None:
    problems = []
    for name, service in SERVICES.items():
        unknown = [k for k in service if k not in COMPOSE_SERVICE_KEYS and not str(k).startswith("x-")]
        if unknown:
            problems.append(f"{name}: unknown keys {unknown}")
        unknown_hc = [k for k in service.get("healthcheck") or {} if k not in HEALTHCHECK_KEYS]
        if unknown_hc:
            problems.append(f"{name}: unknown healthcheck keys {unknown_hc}")
        if "restart" in service and not isinstance(service["restart"], str):
            problems.append(
                f'{name}: restart is {service["restart"]!r}; quote it (restart: "no" - bare no is a boolean)'
            )
    assert not problems, "\n".join(problems)


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


@pytest.mark.parametrize("name", ["migrate", "worker", "supervisor"])
def test_app_environment_validates_as_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import settings

    for key in [k for k in os.environ if k.startswith("SAS_")]:
        monkeypatch.delenv(key)
    env = environment(SERVICES.get(name, {}))
    assert "SAS_DATABASE__URL" in env and "SAS_TEMPORAL__ADDRESS" in env, (
        f"{name} lacks the database / Temporal settings"
    )
    for key, value in env.items():
        if key.startswith("SAS_"):
            monkeypatch.setenv(key, INTERPOLATION.sub("x", value))
    loaded = settings.Settings(_env_file=None)
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
            if host not in SERVICES:
                problems.append(f"{name}: {key} points at host {host!r}, which is not a compose service")
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


def test_images_are_pinned() -> None:
    problems = []
    for name, service in SERVICES.items():
        image = service.get("image")
        if image is None:
            if not service.get("build"):
                problems.append(f"{name}: neither image nor build")
            continue
        if "@sha256:" in image:
            continue
        tag = image.rpartition("/")[2].partition(":")[2]
        if not tag or tag == "latest" or "$" in tag:
            problems.append(f"{name}: {image!r} is not pinned to a tag")
    assert not problems, "\n".join(problems)


def test_host_ports_are_unique() -> None:
    seen: dict[str, str] = {}
    clashes = []
    for name, service in SERVICES.items():
        for port in service.get("ports") or []:
            published = str(port.get("published") if isinstance(port, dict) else str(port).rsplit(":", 1)[0])
            if published in seen:
                clashes.append(f"{published}: {seen[published]} and {name}")
            seen[published] = name
    assert not clashes, f"host ports published twice: {clashes}"
    assert seen.get("8233") == "temporal-ui", "the Temporal UI should be on http://localhost:8233"


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
    for path in (".git", ".sas", ".venv", "tests", "bench", ".env", "pkg/__pycache__"):
        assert ignored_by_docker(path), f".dockerignore should exclude {path}"
    for path in ("pyproject.toml", "worker.py", "settings.py", "supervisor/__main__.py", "state_store/alembic.ini"):
        assert not ignored_by_docker(path), f".dockerignore must not exclude {path}: the image needs it"
