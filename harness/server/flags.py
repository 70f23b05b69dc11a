"""Which SGLang flag surface to speak, and catching a wrong flag before a launch does.

SGLang renamed flags between its 0.5.1 and current surfaces (`--cuda-graph-max-bs` became
`--cuda-graph-max-bs-decode`; `/get_server_info` became `/server_info`; the facts are in
`harness.sglang`), and a flag from the other era costs a model load to find out: the server
exits 2 with "unrecognized arguments" or "ambiguous option". Three checks, cheapest first:

- `version_problems`: the flags and values known to differ between the two surfaces (pure);
- the simulator's own parser for that surface, for engine=sim (`sweep.launch.parse_check`: the
harness
  only launches the simulator, it never imports it);
- SGLang's own parser (`ServerArgs.add_cli_args`) in the engine's Python when SGLang is
  importable there (`PARSE_WITH_SGLANG`, also what `make compat` runs).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.sglang.surfaces import (
    CURRENT,
    LEGACY,
    RELEASES_READ,
    replacement_flag,
    surface,
    surface_of_flags,
)


def _release_numbers(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def surface_of(version: str) -> str:
    """The flag surface a version speaks when only its version can be read ("0.5.1.post3" ->
    "0.5.1"); `detected_surface` reads the installed SGLang's own parser first."""
    numbers = _release_numbers(version)
    if len(numbers) < 3:
        raise ConfigError(f"cannot read SGLang version {version!r}; expected e.g. {CURRENT}.")
    if numbers < (0, 5, 2):  # the 0.5.1 line and older
        return LEGACY
    oldest_current = min(_release_numbers(r) for r, s in RELEASES_READ.items() if s == CURRENT)
    if numbers >= oldest_current:  # 0.5.22 was read and speaks the current surface
        return CURRENT
    raise ConfigError(
        f"SGLang {version} sits between the two flag surfaces specsweep knows ({LEGACY} and "
        f"{CURRENT}), and its own parser could not be read to tell which flags it has. Make "
        "`from sglang.srt.server_args import ServerArgs` work in the engine's Python (preflight "
        "then reads its flags), or set engine.sglang_version to the closer surface."
    )


@dataclass(frozen=True)
class InstalledSGLang:
    """What the engine's SGLang is, read from its own parser."""

    version: str
    options: frozenset[str]  # every option string of ServerArgs.add_cli_args

    @property
    def surface(self) -> str | None:
        return surface_of_flags(self.options)


# Runs in the engine's own Python: its version and the option strings of its own parser.
PROBE_SGLANG = r"""
import argparse, importlib.metadata as m, json
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
options = sorted({o for action in parser._actions for o in action.option_strings})
print(json.dumps({"version": m.version("sglang"), "options": options}))
"""


# A Python to run code in: an interpreter's path, or a command prefix that runs one where the
# engine runs (engine.probe, e.g. ("docker", "run", "--rm", IMAGE, "python3")).
Python = str | tuple[str, ...]


def _argv(python: Python) -> list[str]:
    return [python] if isinstance(python, str) else list(python)


def _named(python: Python) -> str:
    return python if isinstance(python, str) else " ".join(python)


@functools.lru_cache(maxsize=8)
def probe_sglang(python: Python, extra_path: str | None = None) -> InstalledSGLang:
    """The SGLang in `python`'s environment, by its own parser (an import of its server args:
    seconds). RuntimeError with its stderr when that does not run."""
    proc = _run_in(python, PROBE_SGLANG, "", extra_path, timeout=300)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = proc.stdout[-500:]
        raise RuntimeError(f"SGLang's parser did not run in {_named(python)}: {tail}") from None
    return InstalledSGLang(out["version"], frozenset(out["options"]))


def parser_problems(flags: list[str], installed: InstalledSGLang) -> list[str]:
    """The flags in `flags` the installed SGLang's parser would refuse (argparse, whose
    `allow_abbrev` takes a unique prefix), each with the flag to use there instead."""
    problems = []
    for name, _ in _flag_values(flags):
        if name in installed.options or name.startswith("--sim-"):
            continue
        matches = sorted(o for o in installed.options if o.startswith(name))
        if len(matches) == 1:
            continue
        instead = replacement_flag(name)
        fix = f"use {instead}" if instead in installed.options else "drop it"
        if matches:
            problems.append(
                f"{name} is ambiguous in SGLang {installed.version} (could match "
                f"{', '.join(matches)}): {fix}."
            )
        else:
            problems.append(f"{name} does not exist in SGLang {installed.version}: {fix}.")
    return problems


def engine_python(program: tuple[str, ...]) -> str | None:
    """The interpreter that will run the server: `python -m ...` or a console script's."""
    head = program[0]
    if Path(head).name.startswith("python"):
        return shutil.which(head) or head
    script = shutil.which(head)
    if script is None:
        return None
    first = Path(script).read_bytes()[:200].split(b"\n", 1)[0]
    if first.startswith(b"#!") and b"python" in first:
        words = first[2:].decode().split()
        if Path(words[0]).name == "env" and len(words) > 1:  # #!/usr/bin/env python3
            return shutil.which(words[-1]) or words[-1]
        return words[0]
    return None


def installed_sglang_version(python: Python) -> str | None:
    """SGLang's version in `python`'s environment, without importing it (seconds, not 10s)."""
    code = "import importlib.metadata as m; print(m.version('sglang'))"
    timeout = 60 if isinstance(python, str) else 300  # a probe may start a container
    try:
        proc = subprocess.run(
            [*_argv(python), "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.lru_cache(maxsize=8)
def detected_surface(program: tuple[str, ...]) -> str:
    """engine.sglang_version unset: the flag surface of the SGLang the engine's Python has, read
    from its own parser (which flags exist), else from its version.

    Without a readable SGLang it is the current surface; preflight's engine check then fails with
    what to install, before anything launches."""
    python = engine_python(program)
    if python is None:
        return CURRENT
    try:
        installed = probe_sglang(python)
    except RuntimeError:
        version = installed_sglang_version(python)
        return surface_of(version) if version else CURRENT
    if installed.surface is None:
        raise ConfigError(
            f"SGLang {installed.version}'s parser has neither {surface(CURRENT).marker_flag} nor "
            f"{surface(LEGACY).marker_flag}: specsweep cannot tell which flag set it speaks. "
            f"Install SGLang {CURRENT}."
        )
    return installed.surface


def _flag_values(argv: list[str]) -> list[tuple[str, str | None]]:
    out = []
    for i, part in enumerate(argv):
        if not part.startswith("--"):
            continue
        name, eq, value = part.partition("=")
        if not eq:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            value = nxt if nxt is not None and not nxt.startswith("--") else None
        out.append((name, value))
    return out


def version_problems(flags: list[str], version: str) -> list[str]:
    """What in `flags` (SGLang flags, no program) the `version` surface would reject, with the
    fix (the facts are `harness.sglang`'s)."""
    facts = surface(version)
    problems = []
    for name, value in _flag_values(flags):
        if not facts.has(name):
            instead = facts.absent[name]
            fix = f"use {instead}" if instead else "drop it"
            problems.append(f"{name} does not exist in SGLang {version}: {fix}.")
        choices = facts.choices.get(name)
        if choices and value is not None and value.upper() not in (c.upper() for c in choices):
            problems.append(
                f"{name} {value} is not accepted by SGLang {version}: use one of "
                f"{', '.join(choices)}."
            )
    return problems


# Runs in the engine's own Python: argv lists as JSON on stdin, one error (or null) per argv.
PARSE_WITH_SGLANG = r"""
import argparse, contextlib, io, json, sys
from sglang.srt.server_args import ServerArgs
out = []
for argv in json.load(sys.stdin):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
        out.append({"error": None, "args": {k: v for k, v in vars(ns).items()
                                            if isinstance(v, (str, int, float, bool, list))
                                            or v is None}})
    except SystemExit:
        out.append({"error": err.getvalue().strip().splitlines()[-1], "args": None})
json.dump(out, sys.stdout)
"""


def parse_with_sglang(
    python: str, argvs: list[list[str]], *, extra_path: str | None = None
) -> list[dict]:
    """Each argv through SGLang's own parser in `python`'s environment."""
    proc = _run_in(python, PARSE_WITH_SGLANG, json.dumps(argvs), extra_path, timeout=300)
    return json.loads(proc.stdout)


def _run_in(
    python: Python, code: str, stdin: str, extra_path: str | None, *, timeout: float
) -> subprocess.CompletedProcess:
    env = None
    if extra_path:
        env = {**os.environ, "PYTHONPATH": extra_path}
    try:
        proc = subprocess.run(
            [*_argv(python), "-c", code],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"SGLang's parser did not run in {_named(python)}: {exc}") from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"SGLang's parser did not run in {_named(python)}:\n{proc.stderr[-2000:]}"
        )
    return proc
