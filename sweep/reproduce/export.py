"""A measured configuration as something to run in production: a launch script and a unit.

Both carry the argv and environment of the command to deploy (NCCL settings included): SGLang's
command for the trial's configuration (sweep.reproduce.deploy_form), and above it, as comments,
what the operator must know first (what it was chosen for, what is pinned as measured, a
placeholder path, the listening address, simulated numbers), then the commands that follow on
from it, each on one line as it runs. The unit runs an absolute interpreter as a named user and
reports "started" only once the server answers /health (systemd.service(5): ExecStartPost= runs
once ExecStart= has been invoked, and the start job, which units ordered After= it wait for,
ends when it exits; a failure or TimeoutStartSec= stops the unit). Secrets never appear: an
environment variable or flag value that looks like one is replaced by a reference to an
environment variable the operator sets (SGLANG_API_KEY for --api-key).
"""

from __future__ import annotations

import json
import math
import re
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.server.command import ServerCommand
from harness.server.redact import redacted_argv, redacted_env

SECRET_FLAG_ENV = "SGLANG_API_KEY"
# The unit's interpreter where the command names a bare `python` and no --python is given: a
# placeholder, said to be one in the unit and on the console.
DEFAULT_PYTHON = "/opt/sglang/.venv/bin/python"
DEFAULT_USER = "sglang"  # the unit's User=: a system user the operator creates
CURL = "/usr/bin/curl"
HEALTH_RETRY_DELAY_S = 5
# One /health request: SGLang answers it with a one-token generation, waiting up to
# SGLANG_HEALTH_CHECK_TIMEOUT (20 s) for it; 503 until its warm-up request has passed.
HEALTH_ATTEMPT_S = 30
START_MARGIN_S = 60  # TimeoutStartSec beyond the readiness wait: curl gives up first, and says why
CONTINUATION = " \\\n    "  # backslash, newline, indent
_UNIT_SAFE = re.compile(r"[A-Za-z0-9_./:=,+@-]+")  # needs no quoting in a unit file


def _argv_shell(command: ServerCommand) -> str:
    """One flag (with its value) per line."""
    secret = f'"${{{SECRET_FLAG_ENV}:?set {SECRET_FLAG_ENV}}}"'
    lines: list[list[str]] = [[]]
    for part in redacted_argv(command.argv):
        if part is not None and part.startswith("--"):
            lines.append([])
        lines[-1].append(secret if part is None else shlex.quote(part))
    return CONTINUATION.join(" ".join(line) for line in lines if line)


def _one_line(text: str) -> str:
    """A description from config values, fit for a comment or a unit key: a newline in it would
    start a shell command or a unit directive."""
    return " ".join(text.split())


def _comments(notes: Sequence[str]) -> list[str]:
    """Each note as `# ` lines: one line of text first (a newline in a path from the config
    would end the comment and start a command or a directive), then wrapped to read."""
    lines = []
    for note in notes:
        # Not at a hyphen: an option's name (--no-attention-pin) stays whole.
        wrapped = textwrap.wrap(_one_line(note), 96, break_on_hyphens=False)
        lines += [f"# {line}" for line in wrapped]
    return lines


def _command_lines(commands: Sequence[tuple[str, str]]) -> list[str]:
    """What each command is for, then the command on one line of its own, unwrapped, so that it
    runs as printed. One whose quoted text holds a newline would end the comment: not printed."""
    lines = []
    for purpose, command in commands:
        lines += _comments([purpose + ":"])
        shown = command if "\n" not in command else "(not printed: an argument holds a newline)"
        lines.append(f"#   {shown}")
    return lines


def _unit_quote(value: str, exec_line: bool) -> str:
    """systemd's quoting (systemd.syntax(7)): double quotes with C escapes, so a newline cannot
    end the line; % is a specifier and, on Exec lines, $ a variable, both doubled."""
    if _UNIT_SAFE.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    escaped = escaped.replace("%", "%%")
    if exec_line:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'


def launch_script(
    command: ServerCommand,
    description: str,
    notes: Sequence[str] = (),
    commands: Sequence[tuple[str, str]] = (),
) -> str:
    lines = [
        "#!/usr/bin/env bash",
        f"# {_one_line(description)}",
        f"# Exported by specsweep on {datetime.now():%Y-%m-%d %H:%M}.",
        *_comments(notes),
        *_command_lines(commands),
        "set -euo pipefail",
    ]
    for name, value in sorted(redacted_env(command.env).items()):
        if value is None:
            lines.append(f': "${{{name}:?set {name} in the environment (not exported: a secret)}}"')
            lines.append(f"export {name}")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    lines.append(f"exec {_argv_shell(command)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Service:
    """How the unit runs the command: the interpreter (None: the command's own where it is an
    absolute path, else DEFAULT_PYTHON, a placeholder), the user, and how long start-up may
    take before systemd gives up (the model load, the CUDA graphs, the warm-up request)."""

    python: str | None = None
    user: str = DEFAULT_USER
    start_timeout_s: int = 2400  # conf/engine/sglang.yaml's ready_timeout_s

    def __post_init__(self) -> None:
        if self.python is not None and not self.python.startswith("/"):
            raise ValueError(
                f"--python {self.python}: give the absolute path of the Python that has SGLang "
                "(systemd does not search the PATH of your shell), e.g. " + DEFAULT_PYTHON
            )
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", self.user):
            raise ValueError(f"--user {self.user!r}: a user name such as {DEFAULT_USER}")


def unit_program(command: ServerCommand, service: Service) -> tuple[str, bool]:
    """The program ExecStart names, and whether it is the placeholder: for a Python's `-m`
    module, --python, else the command's own interpreter where it is an absolute path (the one
    the trial ran with), else DEFAULT_PYTHON; any other program as it is."""
    program = command.argv[0]
    if command.argv[1:2] != ("-m",):
        return program, False
    if service.python is not None:
        return service.python, False
    return (program, False) if program.startswith("/") else (DEFAULT_PYTHON, True)


def health_url(command: ServerCommand) -> str:
    """Where this machine reaches the server's /health: a wildcard address is reached on
    loopback."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(command.host, command.host)
    host = f"[{host}]" if ":" in host else host
    scheme = command.base_url.partition("://")[0] or "http"
    return f"{scheme}://{host}:{command.port}/health"


def readiness(command: ServerCommand, wait_s: int) -> list[str]:
    """curl retries every HEALTH_RETRY_DELAY_S until /health answers 200, for `wait_s` in all:
    --retry-all-errors retries a refused connection (nothing listens during the model load)
    and, with --fail, SGLang's 503 while it warms up (curl 7.71 or later)."""
    return [
        CURL,
        "--silent",
        "--show-error",
        "--fail",
        "--output",
        "/dev/null",
        "--max-time",
        str(HEALTH_ATTEMPT_S),
        "--retry",
        str(math.ceil(wait_s / HEALTH_RETRY_DELAY_S)),
        "--retry-delay",
        str(HEALTH_RETRY_DELAY_S),
        "--retry-max-time",
        str(wait_s),
        "--retry-all-errors",
        health_url(command),
    ]


def systemd_unit(
    command: ServerCommand,
    description: str,
    env_file: str,
    notes: Sequence[str] = (),
    commands: Sequence[tuple[str, str]] = (),
    service: Service = Service(),
) -> str:
    env = redacted_env(command.env)
    parts = list(redacted_argv(command.argv))
    parts[0], placeholder = unit_program(command, service)
    notes = list(notes)
    if placeholder:
        notes.append(
            f"WARNING: ExecStart's {DEFAULT_PYTHON} is a placeholder for the Python that has "
            "SGLang on the deploying machine: export with --python /absolute/path/to/python, or "
            "edit ExecStart (systemd looks a bare python up in its own search path, not your "
            "shell's PATH or virtual environment)."
        )
    elif not parts[0].startswith("/"):
        # systemd.service(5), since v239: a relative program is looked up in a search path fixed
        # at systemd's build, not the PATH of the shell that installs the unit.
        notes.append(
            f"ExecStart's {parts[0]} is looked up in systemd's own search path "
            "(/usr/local/bin, /usr/bin, ...), not your shell's PATH or virtual environment: "
            f"replace it with its absolute path."
        )
    notes += [
        f"Runs as User={service.user} (--user): a system user to create first, that can read "
        "the model and drafter checkpoints; its home directory holds the Hugging Face cache.",
        f"Started only once {health_url(command)} answers 200 (after SGLang's warm-up "
        f"request): ExecStartPost= retries it for up to {service.start_timeout_s} s, within "
        f"TimeoutStartSec={service.start_timeout_s + START_MARGIN_S}; if it never answers, "
        "systemd stops the unit and reports the start failed.",
    ]
    argv = [
        f"${{{SECRET_FLAG_ENV}}}" if part is None else _unit_quote(part, exec_line=True)
        for part in parts
    ]
    probe = " ".join(
        _unit_quote(p, exec_line=True) for p in readiness(command, service.start_timeout_s)
    )
    lines = [
        *_comments(notes),
        *_command_lines(commands),
        "[Unit]",
        f"Description={_one_line(description).replace('%', '%%')}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        # exec: `systemctl start` fails if the program or the user cannot be executed
        "Type=exec",
        f"User={service.user}",
        *(
            f"Environment={_unit_quote(f'{k}={v}', exec_line=False)}"
            for k, v in sorted(env.items())
            if v is not None
        ),
        f"# Secrets ({', '.join(sorted(k for k, v in env.items() if v is None)) or SECRET_FLAG_ENV}"
        f" if used) go in {env_file}, readable by root only.",
        f"EnvironmentFile=-{env_file}",
        f"ExecStart={' '.join(argv)}",
        f"ExecStartPost={probe}",
        f"TimeoutStartSec={service.start_timeout_s + START_MARGIN_S}",
        "Restart=on-failure",
        "RestartSec=30",
        # Stop the whole tree: SGLang's schedulers hold the GPUs.
        "KillMode=control-group",
        "TimeoutStopSec=120",
        "LimitNOFILE=1048576",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Deployment:
    """What `sweep.reproduce` chose to deploy and why: the hook for adaptive speculation too
    (`adaptive_config`: the SGLang JSON to start the server with, sweep.adaptive)."""

    trial: str
    run_id: str
    why: str
    level: int | None
    argv: list[str]
    simulated: bool  # the numbers that chose it are the simulator's
    form: str = "sglang"  # sweep.reproduce.deploy_form: sglang, or sim (the simulator's command)
    warnings: list[str] = field(default_factory=list)  # also at the top of launch_server.sh
    adaptive_config: str | None = None
    chosen_for: dict[str, Any] = field(default_factory=dict)  # sweep.reproduce.load.ChosenFor
    measured: dict[str, Any] = field(default_factory=dict)  # sweep.reproduce.measured.Measured
    pinned: dict[str, str] = field(default_factory=dict)  # flag -> value pinned as measured
    pins: list[str] = field(default_factory=list)  # each pin in words, or why it is missing
    service: dict[str, Any] = field(default_factory=dict)  # the unit's Service
    commands: dict[str, str] = field(default_factory=dict)  # what for -> the command, as printed

    def write(self, path: Path) -> Path:
        data = asdict(self)
        data["argv"] = [a if a is not None else "<redacted>" for a in redacted_argv(self.argv)]
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path
