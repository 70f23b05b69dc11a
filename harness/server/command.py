"""Config dataclasses -> SGLang argv + environment + request headers. Pure: no I/O, no clock.

Flags are derived mechanically from `ServerSpec` field names (`tp_size` -> `--tp-size`);
the few that differ between SGLang versions come from `harness.sglang` (`Surface.flag_names`,
`Surface.per_phase_cuda_graph`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from harness.errors import ConfigError
from harness.server.flags import engine_python, version_problems
from harness.sglang.surfaces import CURRENT, surface
from harness.spec import EngineSpec, ServerSpec

# ServerSpec fields that are not SGLang flags (handled below or not flags at all).
_NOT_FLAGS = {"extra_args", "env", "disable_cuda_graph", "cuda_graph_max_bs", "hicache_size"}

# SGLang's own defaults: leaving them out keeps the exported launch command readable.
_OMIT_WHEN_DEFAULT = {"decode_log_interval": 40}
_MISSING = object()


@dataclass(frozen=True)
class ServerCommand:
    """A launch and how to talk to what it starts. The API key travels in `headers` (what every
    client sends) and `secrets` (what `redact` masks), both built with the argv, so nothing reads
    it back out of the argv."""

    argv: tuple[str, ...]
    env: Mapping[str, str]  # additions to the inherited environment
    base_url: str
    host: str
    port: int
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # Authorization
    secrets: tuple[str, ...] = field(default=(), repr=False)  # literal values to mask
    # The server runs in the launched process tree (the program is a Python), so the process
    # listening on its port must be in that tree; False for a wrapper (docker run, srun), whose
    # server lives in processes the launch does not own.
    local: bool = True


def engine_program(program: Sequence[str]) -> tuple[str, ...]:
    """The program as launched: a bare "python" is the harness's own interpreter, so the venv's
    packages are the ones that run."""
    head, *rest = program
    return (sys.executable if head == "python" else head, *rest)


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
    program = engine_program(engine.program)
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
        headers={"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {},
        secrets=(spec.api_key,) if spec.api_key else (),
        local=engine_python(program) is not None,
    )
