"""The command a user deploys, from a recorded trial: `python -m sglang.launch_server` with the
trial's SGLang flags, even when the study ran on the simulator.

A simulated trial launched `python -m harness.sim <SGLang flags> --sim-*`: its SGLang flags are
the same ones `harness.server.command.server_flags` builds for SGLang (the simulator speaks
SGLang's command line), so the deploy form rebuilds the command from the trial's `ServerSpec`
with SGLang's program and without the simulator's own flags. `--form sim` keeps the simulator's
command (to try the export on a machine without a GPU). The model and drafter paths are the
ones the user configured (model.path, drafter.path) unless overridden, and the warnings say
which of them cannot be what a deployment loads. What the server resolved for the trial is
pinned as flags (sweep.reproduce.measured): the attention backend, the request cap and the
decode CUDA-graph batch size it was measured with.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import OmegaConf

from harness.errors import ConfigError
from harness.server.command import ServerCommand, build_server_command
from harness.sim.cli import build_parser
from harness.spec import ServerSpec, TrialSpec
from sweep.paths import CONF
from sweep.reproduce.measured import Measured, pin

SGLANG, SIM = "sglang", "sim"
FORMS = (SGLANG, SIM)
# conf/engine/sglang.yaml's program, as the deploying box spells it: its own `python`, not the
# interpreter that ran the sweep (engine_program resolves a bare "python" to that one).
SGLANG_PROGRAM = ("python", "-m", "sglang.launch_server")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_SIM_PREFIX = "--sim-"


@dataclass(frozen=True)
class Overrides:
    """What the user asks to change from the recorded trial (None: keep the recorded value)."""

    model_path: str | None = None
    drafter_path: str | None = None
    host: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class DeployForm:
    form: str  # sglang | sim
    command: ServerCommand
    warnings: tuple[str, ...]  # for the console and the top of launch_server.sh
    simulated: bool  # the numbers that chose it came from the simulator
    speculative: bool  # False: the baseline
    pins: tuple[str, ...] = ()  # what is pinned as measured, or why not (measured.pin)
    pinned: dict[str, str] = field(default_factory=dict)  # the pinned flags and their values
    engine: str | None = None  # what it was measured on (measured.Measured.engine)

    def comments(self) -> list[str]:
        """What the exported script and unit say above the command, in reading order."""
        if self.form == SIM:
            origin = (
                "The simulator's command (python -m harness.sim), as the trial ran: it serves "
                "simulated numbers on a CPU, not the model. Without --form sim, specsweep "
                "reproduce exports SGLang's command."
            )
        elif self.simulated:
            origin = (
                "SGLang's command for the simulated trial's configuration: the SGLang flags it "
                "ran with, without the simulator's --sim-* flags (--form sim keeps them)."
            )
        else:
            origin = "The trial's exact command (engine=sglang)."
        notes = [origin]
        if self.simulated:
            notes.append(
                "The numbers that chose this configuration are SIMULATED (engine=sim: "
                "harness/sim's performance model, not hardware). Measure it with engine=sglang "
                "before relying on them."
            )
        if self.engine is not None:
            notes.append(
                f"Measured on {self.engine}. Deploy it on that SGLang release: another one may "
                "resolve the settings below differently."
            )
        notes += [f"Pinned as measured: {p}" for p in self.pins]
        if not self.speculative:
            notes.append("The baseline: no speculation (SGLang without a drafter).")
        notes += [f"WARNING: {w}" for w in self.warnings]
        return notes + host_notes(self.command.host, self.command.port)


@functools.cache
def _sim_arity(version: str) -> dict[str, int]:
    """How many values each --sim-* flag takes, from the simulator's own parser."""
    arity = {}
    for action in build_parser(version)._actions:
        for option in action.option_strings:
            if option.startswith(_SIM_PREFIX):
                arity[option] = 0 if action.nargs == 0 else 1
    return arity


def without_sim_flags(args: Sequence[str], version: str) -> tuple[str, ...]:
    """`args` without the simulator's --sim-* flags and their values (`--sim-x v` or
    `--sim-x=v`); every other flag is SGLang's and stays, in order."""
    arity = _sim_arity(version)
    kept: list[str] = []
    skip = 0
    for arg in args:
        if skip:
            skip -= 1
            continue
        if not arg.startswith(_SIM_PREFIX):
            kept.append(arg)
            continue
        flag, joined, _ = arg.partition("=")
        if flag not in arity:
            raise ConfigError(
                f"engine.extra_args has {flag}, which the simulator does not know "
                f"(harness/sim/cli.py): drop it from engine.extra_args, or export with --form sim."
            )
        skip = 0 if joined else arity[flag]
    return tuple(kept)


def _deploy_server(server: ServerSpec, overrides: Overrides) -> tuple[ServerSpec, list[str]]:
    changes: dict = {}
    notes = []
    if overrides.model_path:
        changes["model_path"] = overrides.model_path
    if overrides.drafter_path:
        if server.speculative:
            changes["speculative_draft_model_path"] = overrides.drafter_path
        else:
            notes.append(
                f"--drafter-path {overrides.drafter_path} is ignored: the configuration to "
                "deploy is the baseline, which runs without a drafter"
            )
    if overrides.host:
        changes["host"] = overrides.host
    if overrides.port is not None:
        changes["port"] = overrides.port
    try:
        return replace(server, **changes), notes  # ServerSpec checks them as it checked the config
    except ConfigError as exc:
        raise ConfigError(f"--port {overrides.port}: {exc}") from exc


def deploy_form(
    spec: TrialSpec,
    form: str = SGLANG,
    overrides: Overrides = Overrides(),
    measured: Measured | None = None,
    attention: bool = True,
) -> DeployForm:
    """The command to deploy `spec`'s configuration in `form`, and what to warn about; with
    `measured`, what the trial's server resolved pinned as flags (`attention` False: not the
    attention backend)."""
    if form not in FORMS:
        raise ConfigError(f"--form {form}: use one of {', '.join(FORMS)}.")
    engine = spec.engine
    if form == SIM and not engine.simulated:
        raise ConfigError(
            "--form sim: this study ran on SGLang (engine=sglang), so there is no simulator "
            "command to keep; drop --form (the default is --form sglang)."
        )
    server, notes = _deploy_server(spec.server, overrides)
    pins: list[str] = []
    pinned_flags: dict[str, str] = {}
    if measured is not None:
        given = [*server.extra_args, *engine.extra_args]
        version = engine.sglang_version
        pinned = pin(server, measured, given, version, attention, engine.simulated)
        server, pins, pinned_flags = pinned.server, pinned.notes, pinned.flags
    if form == SGLANG and engine.simulated:
        engine = replace(
            engine,
            name=SGLANG,
            program=SGLANG_PROGRAM,
            extra_args=without_sim_flags(engine.extra_args, engine.sglang_version),
        )
        command = build_server_command(server, engine)
        flags = command.argv[len(engine.program) :]  # after the program as resolved
        command = replace(command, argv=(*SGLANG_PROGRAM, *flags))
    else:  # a real study's own command (its program as it ran), or the simulator's
        command = build_server_command(server, engine)
    if form == SGLANG:
        notes += path_warnings(server, spec.engine.simulated, overrides)
    return DeployForm(
        form,
        command,
        tuple(notes),
        spec.engine.simulated,
        server.speculative,
        tuple(pins),
        pinned_flags,
        measured.engine if measured is not None else None,
    )


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~"))


@functools.cache
def _shipped_paths(group: str) -> dict[str, str]:
    """The paths conf/<group>/*.yaml ship, by path: which file it came from."""
    found = {}
    for file in sorted((CONF / group).glob("*.yaml")):
        path = OmegaConf.load(file).get("path")
        if path:
            found[str(path)] = f"conf/{group}/{file.name}"
    return found


def path_warnings(server: ServerSpec, simulated: bool, overrides: Overrides) -> list[str]:
    """A model or drafter path that cannot be what a deployment loads: a local path missing on
    this machine (a simulated study never opened it: the config's placeholder, such as
    conf/config.yaml's drafter.path=/models/eagle3 example), or, from a simulated study, a
    shipped config's Hugging Face id that nobody chose."""
    warnings = []
    for key, option, path, given in (
        ("model.path", "--model-path", server.model_path, overrides.model_path),
        (
            "drafter.path",
            "--drafter-path",
            server.speculative_draft_model_path,
            overrides.drafter_path,
        ),
    ):
        if path is None:
            continue
        where = f"{option} {path}" if given else f"{key}={path}"
        fix = f"pass {option} /path/to/checkpoint (or set {key} in the sweep's config)"
        if _looks_local(path) and not Path(path).expanduser().exists():
            why = " (a simulated study never opens it)" if simulated else ""
            warnings.append(f"{where} does not exist on this machine{why}: {fix}")
        elif simulated and not given and path in _shipped_paths(key.split(".")[0]):
            shipped = _shipped_paths(key.split(".")[0])[path]
            warnings.append(
                f"{where} is {shipped}'s default, never loaded by this simulated study: SGLang "
                f"will download that Hugging Face id; if you deploy another copy, {fix}"
            )
    return warnings


def host_notes(host: str, port: int) -> list[str]:
    """What the listening address means for a service, and how to change it."""
    if host in LOOPBACK:
        return [
            f"--host {host} --port {port}: loopback, so only clients on this machine can reach "
            "the server (other machines get connection refused). To serve the network, export "
            "again with --host 0.0.0.0 (the command below), behind a firewall or a reverse proxy "
            "that terminates TLS (SGLang's --api-key is a bearer token, not a transport)."
        ]
    if host in ("0.0.0.0", "::", ""):
        return [
            f"--host {host} --port {port}: every interface, so any machine that reaches port "
            f"{port} can use the server: keep it behind a firewall or a reverse proxy, or "
            "export again with --host 127.0.0.1 for this machine only (the command below)."
        ]
    return [f"--host {host} --port {port}: reachable where {host} is routed."]
