"""Which SGLang flag surface to speak, and catching a wrong flag before a launch does.

SGLang renamed flags between 0.5.1 and 0.5.23 (`--cuda-graph-max-bs` became
`--cuda-graph-max-bs-decode`; `/get_server_info` became `/server_info`), and a flag from the
other era costs a model load to find out: the server exits 2 with "unrecognized arguments" or
"ambiguous option". Three checks, cheapest first:

- `version_problems`: the flags and values known to differ between the two surfaces (pure);
- the simulator's own parser for that surface (`harness.sim.cli`), in-process;
- SGLang's own parser (`ServerArgs.add_cli_args`) in the engine's Python when SGLang is
  importable there (`PARSE_WITH_SGLANG`, also what `make compat` runs).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from harness.errors import ConfigError

SURFACES = ("0.5.23", "0.5.1")

# Flags that do not exist in a surface -> what to use there instead (None: nothing).
_ABSENT: dict[str, dict[str, str | None]] = {
    "0.5.23": {
        "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
        "--cuda-graph-bs": "--cuda-graph-bs-decode",
    },
    "0.5.1": {
        "--cuda-graph-max-bs-decode": "--cuda-graph-max-bs",
        "--cuda-graph-max-bs-prefill": None,
        "--cuda-graph-bs-decode": "--cuda-graph-bs",
        "--cuda-graph-bs-prefill": None,
        "--cuda-graph-backend-decode": "--disable-cuda-graph",
        "--cuda-graph-backend-prefill": "--disable-cuda-graph",
        "--speculative-draft-model-revision": None,
        "--enable-hicache": "--enable-hierarchical-cache",
    },
}
# Values a surface's parser (or its start-up validation) rejects.
CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "0.5.23": {
        "--speculative-algorithm": (
            "EAGLE",
            "EAGLE3",
            "NEXTN",
            "STANDALONE",
            "NGRAM",
            "DFLASH",
            "DSPARK",
            "UNO",
        ),
    },
    "0.5.1": {
        "--speculative-algorithm": ("EAGLE", "EAGLE3", "NEXTN"),
        "--reasoning-parser": (
            "deepseek-r1",
            "deepseek-v3",
            "glm45",
            "gpt-oss",
            "kimi",
            "qwen3",
            "qwen3-thinking",
            "step3",
        ),
    },
}


def surface_of(version: str) -> str:
    """The flag surface an installed SGLang version speaks ("0.5.1.post3" -> "0.5.1")."""
    numbers = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    if len(numbers) < 3:
        raise ConfigError(f"cannot read SGLang version {version!r}; expected e.g. 0.5.23.")
    if numbers[:3] < (0, 5, 2):
        return "0.5.1"
    if numbers[:3] >= (0, 5, 23):
        return "0.5.23"
    raise ConfigError(
        f"SGLang {version} sits between the two flag surfaces specsweep knows (0.5.1 and "
        "0.5.23), whose flag names and log formats differ. Install one of those, or set "
        "engine.sglang_version to the closer one and run `make compat`-style checks first."
    )


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
        return first[2:].decode().strip().split()[0]
    return None


def installed_sglang_version(python: str) -> str | None:
    """SGLang's version in `python`'s environment, without importing it (seconds, not 10s)."""
    code = "import importlib.metadata as m; print(m.version('sglang'))"
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


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


def version_problems(flags: list[str], surface: str) -> list[str]:
    """What in `flags` (SGLang flags, no program) the `surface` would reject, with the fix."""
    problems = []
    for name, value in _flag_values(flags):
        if name in _ABSENT[surface]:
            instead = _ABSENT[surface][name]
            fix = f"use {instead}" if instead else "drop it"
            problems.append(f"{name} does not exist in SGLang {surface}: {fix}.")
        choices = CHOICES[surface].get(name)
        if choices and value is not None and value.upper() not in (c.upper() for c in choices):
            problems.append(
                f"{name} {value} is not accepted by SGLang {surface}: use one of "
                f"{', '.join(choices)}."
            )
    return problems


def sim_parser_problems(flags: list[str], surface: str) -> list[str]:
    """Parse with the simulator's copy of the surface's argparse (what engine=sim will run)."""
    import contextlib
    import io

    from harness.sim.cli import build_parser

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            build_parser(surface).parse_args([*flags, "--sim-sglang-version", surface])
        except SystemExit:
            return [stderr.getvalue().strip().splitlines()[-1]]
    return []


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
    env = None
    if extra_path:
        import os

        env = {**os.environ, "PYTHONPATH": extra_path}
    proc = subprocess.run(
        [python, "-c", PARSE_WITH_SGLANG],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"SGLang's parser did not run in {python}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)
