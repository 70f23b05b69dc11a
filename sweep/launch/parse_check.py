"""Parse a sweep's launches with the parser that will run them, before any launch does.

The cheap checks are the harness's (`harness.server.flags.version_problems`, SGLang's own parser run
in the engine's Python); the simulator's parser is read here, on the sweep side, because the harness
only launches the simulator as a process and never imports it.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.server.command import engine_program, server_flags
from harness.server.flags import (
    engine_python,
    parse_with_sglang,
    parser_problems,
    probe_sglang,
    version_problems,
)
from harness.sim.cli import build_parser
from harness.sim.unmodelled import not_modelled
from sweep.config.schema import ModelConfig, ServerConfig

_GROUP_FIELDS = (
    ("server", set(ServerConfig.__dataclass_fields__)),
    ("model", set(ModelConfig.__dataclass_fields__)),
)

if TYPE_CHECKING:
    from harness.spec import TrialSpec


# The config key behind each flag a launch carries, so a parser's refusal names what to change.
_SIM_KEYS = {
    "--sim-hardware": "hardware.sim_profile",
    "--sim-target": "model.sim_profile",
    "--sim-drafter": "drafter.sim_profile",
    "--sim-clock-scale": "engine.clock_scale",
    "--sim-seed": "benchmark.seed",
    "--sim-sglang-version": "engine.sglang_version",
}


def _keys_named(problems: list[str]) -> list[str]:
    """The config keys behind the flags the problems mention."""
    text = " ".join(problems)
    keys = [key for flag, key in _SIM_KEYS.items() if f"{flag}:" in text or f"{flag} " in text]
    for flag in sorted(set(re.findall(r"--[a-z][a-z0-9-]*", text))):
        name = flag[2:].replace("-", "_")
        group = next((g for g, fields in _GROUP_FIELDS if name in fields), None)
        if group:
            keys.append(f"{group}.{name}")
    return list(dict.fromkeys(keys))


def sim_parser_problems(flags: list[str], surface: str) -> list[str]:
    """Parse with the simulator's copy of the surface's argparse (what engine=sim will run)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            build_parser(surface).parse_args([*flags, "--sim-sglang-version", surface])
        except SystemExit:
            return [stderr.getvalue().strip().splitlines()[-1]]
    return []


def sim_unmodelled(flags: list[str], surface: str) -> str | None:
    """What the simulator refuses at start-up because it does not model it (a page size above
    1: `harness.sim.unmodelled`), for flags its parser accepts; None when it runs them."""
    ns = build_parser(surface).parse_args([*flags, "--sim-sglang-version", surface])
    return not_modelled(vars(ns))


def check_launch_flags(specs: list[TrialSpec]) -> None:
    """Parse the launches a sweep will make with the parser that will run them, before any does:
    the simulator's for engine=sim, SGLang's own when the engine's Python has SGLang."""
    problems: list[str] = []
    unmodelled: list[str] = []
    for spec in specs:
        flags = [*server_flags(spec.server, spec.engine.sglang_version), *spec.engine.extra_args]
        problems += version_problems(flags, spec.engine.sglang_version)
        if spec.engine.simulated:
            refused = sim_parser_problems(flags, spec.engine.sglang_version)
            problems += refused
            if not refused and (why := sim_unmodelled(flags, spec.engine.sglang_version)):
                unmodelled.append(why)
            continue
        python = engine_python(engine_program(spec.engine.program))
        try:
            installed = probe_sglang(python) if python else None
        except RuntimeError:
            installed = None
        if python is None or installed is None:
            continue  # preflight says SGLang is missing; the version table already ran
        # the flags its parser lacks, each with what to use instead; then its own verdict
        missing = parser_problems(flags, installed)
        problems += missing
        for result in [] if missing else parse_with_sglang(python, [flags]):
            if result["error"]:
                problems.append(result["error"])
    if unmodelled and not problems:
        raise ConfigError(
            "The simulator (engine=sim) does not model this launch, which SGLang would run: "
            + " | ".join(dict.fromkeys(unmodelled))
        )
    if problems:
        keys = _keys_named(problems)
        raise ConfigError(
            "SGLang would refuse this launch: "
            + " | ".join(dict.fromkeys(problems))
            + (f" (set by {', '.join(keys)})" if keys else "")
            + " (Flags come from the server, model and drafter groups, server.extra_args and "
            "engine.extra_args; engine.sglang_version picks the SGLang version to speak.)"
        )
