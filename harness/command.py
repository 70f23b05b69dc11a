"""Config dataclasses -> SGLang argv + environment. Pure: no I/O, no clock, no randomness.

Flags are derived mechanically from `ServerSpec` field names (`tp_size` -> `--tp-size`);
the few that differ between SGLang versions come from `harness.sglang` (`Surface.flag_names`,
`Surface.per_phase_cuda_graph`).
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields

from harness.errors import ConfigError
from harness.flags import version_problems
from harness.sglang import CURRENT, surface
from harness.spec import EngineSpec, ServerSpec

# ServerSpec fields that are not SGLang flags (handled below or not flags at all).
_NOT_FLAGS = {"extra_args", "env", "disable_cuda_graph", "cuda_graph_max_bs", "hicache_size"}

# SGLang's own defaults: leaving them out keeps the exported launch command readable.
_OMIT_WHEN_DEFAULT = {"decode_log_interval": 40, "log_level": "info"}
_MISSING = object()


@dataclass(frozen=True)
class ServerCommand:
    argv: tuple[str, ...]
    env: Mapping[str, str]  # additions to the inherited environment
    base_url: str
    host: str
    port: int

    def shell(self) -> str:
        """A copy-pasteable command line (env assignments first), for command.sh."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join([*assignments, shlex.join(self.argv)])


def server_flags(spec: ServerSpec, sglang_version: str = CURRENT) -> list[str]:
    """The SGLang flags for `spec`, in a stable order (the order of ServerSpec's fields)."""
    facts = surface(sglang_version)
    argv: list[str] = []
    for f in fields(spec):
        value = getattr(spec, f.name)
        if f.name in _NOT_FLAGS or value is None or value is False:
            continue
        if _OMIT_WHEN_DEFAULT.get(f.name, _MISSING) == value:
            continue
        argv.append(facts.flag_for(f.name))
        if value is not True:
            argv.append(str(value))
    if spec.hicache_size > 0:
        argv += ["--enable-hierarchical-cache", "--hicache-size", str(spec.hicache_size)]
    if spec.cuda_graph_max_bs is not None:
        argv += [facts.flag_for("cuda_graph_max_bs"), str(spec.cuda_graph_max_bs)]
    if spec.disable_cuda_graph:
        if facts.per_phase_cuda_graph:
            # The current surface deprecates --disable-cuda-graph in favour of per-phase backends.
            argv += ["--cuda-graph-backend-decode", "disabled"]
            argv += ["--cuda-graph-backend-prefill", "disabled"]
        else:
            argv.append("--disable-cuda-graph")
    argv += list(spec.extra_args)
    return argv


def build_server_command(spec: ServerSpec, engine: EngineSpec) -> ServerCommand:
    """The launch, refused here (ConfigError) if the engine's SGLang version would reject a flag."""
    program = list(engine.program)
    if program[0] == "python":
        # Same interpreter as the harness, so the venv's packages are the ones that run.
        program[0] = sys.executable
    flags = server_flags(spec, engine.sglang_version)
    problems = version_problems([*flags, *engine.extra_args], engine.sglang_version)
    if problems:
        raise ConfigError(
            f"this launch would fail on SGLang {engine.sglang_version} "
            f"(engine.sglang_version): " + " ".join(problems)
        )
    argv = [*program, *flags, *engine.extra_args]
    return ServerCommand(
        argv=tuple(argv),
        env=dict(spec.env),
        base_url=spec.base_url,
        host=spec.host,
        port=spec.port,
    )


_SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_SECRET_FLAGS = ("--api-key", "--admin-api-key")
# user:password@ in any URL (postgresql://, mysql://, https://...): the password part.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):(?P<pw>[^@/\s]+)@")
REDACTED = "<redacted>"
API_KEY_ENV = "SGLANG_API_KEY"  # how recorded commands refer to --api-key's value


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_url_passwords(text: str) -> str:
    """postgresql://user:pass@host/db -> postgresql://user:<redacted>@host/db."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}:{REDACTED}@", text)


def has_url_password(text: str) -> bool:
    return bool(_URL_PASSWORD.search(text))


def redacted_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Secret values become None: exported scripts reference them from the environment. A value
    holding a URL with a password (DATABASE_URL=postgresql://u:p@h/db) is a secret too."""
    return {k: (None if is_secret_name(k) or has_url_password(v) else v) for k, v in env.items()}


def redacted_argv(argv: tuple[str, ...] | list[str]) -> list[str | None]:
    """The value after --api-key (and similar) becomes None; `--api-key=VALUE` and URL passwords
    inside any argument are masked in place."""
    out: list[str | None] = []
    hide = False
    for part in argv:
        if hide:
            out.append(None)
        elif part.startswith(tuple(f + "=" for f in _SECRET_FLAGS)):
            out.append(part.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(redact_url_passwords(part))
        hide = part in _SECRET_FLAGS
    return out


def api_key(argv: tuple[str, ...] | list[str]) -> str | None:
    """The --api-key value a command passes, which every client of the server must send."""
    for i, part in enumerate(argv):
        if part == "--api-key" and i + 1 < len(argv):
            return argv[i + 1]
        if part.startswith("--api-key="):
            return part.split("=", 1)[1]
    return None


def recorded_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """The argv as written to result.json, the pid file and logs: --api-key's value is the
    reference $SGLANG_API_KEY, never the key."""
    return ["$" + API_KEY_ENV if part is None else part for part in redacted_argv(argv)]


def recorded_shell(command: ServerCommand) -> str:
    """command.sh: the command line with every secret read from the environment at run time."""
    assignments = [
        f'{k}="${k}"' if v is None else f"{k}={shlex.quote(v)}"
        for k, v in sorted(redacted_env(command.env).items())
    ]
    parts = [
        f'"${API_KEY_ENV}"' if part is None else shlex.quote(part)
        for part in redacted_argv(command.argv)
    ]
    return " ".join([*assignments, *parts])


def secret_values(command: ServerCommand) -> list[str]:
    """The literal secrets a command carries, for masking text the server prints (SGLang logs its
    server_args, --api-key included)."""
    found = [v for k, v in command.env.items() if is_secret_name(k)]
    found += [
        m["pw"] for v in (*command.env.values(), *command.argv) for m in _URL_PASSWORD.finditer(v)
    ]
    key = api_key(command.argv)
    if key:
        found.append(key)
    # Longest first, so a secret that contains another is masked whole.
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return redact_url_passwords(text)
