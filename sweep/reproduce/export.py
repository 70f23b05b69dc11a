"""A measured configuration as something to run in production: a launch script and a unit.

Both carry the argv and environment of the command to deploy (NCCL settings included): SGLang's
command for the trial's configuration (sweep.reproduce.deploy_form), and above it, as comments,
what the operator must know first (a placeholder path, the listening address, simulated numbers).
Secrets never appear: an environment variable or flag value that looks like one is replaced by a
reference to an environment variable the operator sets (SGLANG_API_KEY for --api-key).
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from harness.record.results import Outcome, TrialResult
from harness.server.command import ServerCommand
from harness.server.redact import redacted_argv, redacted_env
from sweep.study import levels
from sweep.study.objective import Objective

SECRET_FLAG_ENV = "SGLANG_API_KEY"
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
        lines += [f"# {line}" for line in textwrap.wrap(_one_line(note), 96)]
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


def launch_script(command: ServerCommand, description: str, notes: Sequence[str] = ()) -> str:
    lines = [
        "#!/usr/bin/env bash",
        f"# {_one_line(description)}",
        f"# Exported by specsweep on {datetime.now():%Y-%m-%d %H:%M}.",
        *_comments(notes),
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


def systemd_unit(
    command: ServerCommand, description: str, env_file: str, notes: Sequence[str] = ()
) -> str:
    env = redacted_env(command.env)
    argv = [
        f"${{{SECRET_FLAG_ENV}}}" if part is None else _unit_quote(part, exec_line=True)
        for part in redacted_argv(command.argv)
    ]
    if not command.argv[0].startswith("/"):
        # systemd.service(5), since v239: a relative program is looked up in a search path fixed
        # at systemd's build, not the PATH of the shell that installs the unit.
        notes = [
            *notes,
            f"ExecStart's {command.argv[0]} is looked up in systemd's own search path "
            "(/usr/local/bin, /usr/bin, ...), not your shell's PATH or virtual environment: "
            f"replace it with the absolute path of the {command.argv[0]} that has SGLang "
            "(e.g. /opt/sglang/.venv/bin/python).",
        ]
    lines = [
        *_comments(notes),
        "[Unit]",
        f"Description={_one_line(description).replace('%', '%%')}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        *(
            f"Environment={_unit_quote(f'{k}={v}', exec_line=False)}"
            for k, v in sorted(env.items())
            if v is not None
        ),
        f"# Secrets ({', '.join(sorted(k for k, v in env.items() if v is None)) or SECRET_FLAG_ENV}"
        f" if used) go in {env_file}, readable by root only.",
        f"EnvironmentFile=-{env_file}",
        f"ExecStart={' '.join(argv)}",
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

    def write(self, path: Path) -> Path:
        data = asdict(self)
        data["argv"] = [a if a is not None else "<redacted>" for a in redacted_argv(self.argv)]
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


def best_by_objective(
    runs: list[tuple[str, dict[str, float]]],
    objective: Objective,
    level: int | None = None,
    baseline: dict[str, float] | None = None,
) -> tuple[int, str] | None:
    """Index of the run to deploy in `runs` ((name, metrics) of measured trials) and why; None
    when none meets the limits. Without a level: the study's objective (a Pareto front's first
    objective), infeasible trials left out, as Optuna ranks. With one: the level's metric
    (sweep.study.levels), limits at that level."""
    found = []
    base_tok_s = (baseline or {}).get("tok_s")
    for i, (name, metrics) in enumerate(runs):
        result = TrialResult(name, "trial", Outcome.OK, "", False, 1.0, {}, metrics=metrics)
        if level is None:
            values = objective.values(result, base_tok_s)
            if values is None or any(v > 0 for v in objective.constraints(result).values()):
                continue
            found.append((values[0], i))
        else:
            value = metrics.get(f"{levels.level_metric(objective, level)}_c{level}")
            if value is None or levels.violations_at(objective, result, level):
                continue
            found.append((value, i))
    if not found:
        return None
    value, index = max(found)
    if level is None:
        label = objective.labels[0]
        return index, f"best by the study's objective ({label} {value:.1f})"
    metric = levels.level_metric(objective, level)
    return index, f"best at concurrency {level} ({metric} {value:.1f})"
