"""What a launch gets when it leaves --mem-fraction-static to SGLang, told before it starts.

SGLang 0.5.23 picks its own fraction when the flag is unset (`arg_groups/memory_hook.py`,
harness.sglang.memory). On an MLA or multimodal model that default can leave almost nothing for
the KV cache: Kimi-K2.5 at TP 8 on 96 GB cards gets 0.758, which its ~74.7 GB of weights per GPU
fill, and the server dies after minutes of weight loading. The sweep's own launches always name a
fraction (sweep.config.fraction); this is for the ones a user shapes (`server.extra_args`, a
search without the fraction, a reproduction or export of a run recorded without one).

The fraction and the KV tokens are computed by the simulator's copy of SGLang's argument
resolution (`harness.sim.cli.resolve`, each default cited there) on the hardware profile the
config names; for a real SGLang launch the KV tokens are the simulator's profile of the model,
so the warning says SIMULATED. Only MLA and multimodal models are warned about: elsewhere
SGLang's default is what the seeds ran at.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from harness.drafter_gate import cached_snapshot, is_hub_id
from harness.server.command import server_flags
from harness.sglang.memory import architecture
from harness.sim.cli import build_parser, resolve
from harness.sim.model.profiles import HARDWARE, TARGETS
from harness.sim.oracle import build_model
from harness.spec import TrialSpec

FLAG = "--mem-fraction-static"


@dataclass(frozen=True)
class DefaultMemory:
    """SGLang's own choice for a launch without the flag."""

    architecture: str
    fraction: float
    kv_tokens: int  # 0: the weights leave no KV cache (SGLang's ValueError after loading)
    hardware: str  # the simulator's hardware profile it was computed on
    simulated_kv: bool  # the KV tokens come from the simulator's profile of the model

    def warning(self) -> str:
        kv = f"{self.kv_tokens:,} KV tokens" if self.kv_tokens > 0 else "no KV cache at all"
        label = " (SIMULATED profile of the model)" if self.simulated_kv else ""
        return (
            f"{FLAG} is unset: SGLang 0.5.23 would pick {self.fraction:.3f} for "
            f"{self.architecture} on {self.hardware}, leaving {kv}{label}"
        )


def names_fraction(flags: list[str]) -> bool:
    return any(f == FLAG or f.startswith(FLAG + "=") for f in flags)


def left_to_sglang(
    spec: TrialSpec, hardware_profile: str | None = None, model_profile: str | None = None
) -> DefaultMemory | None:
    """What `spec`'s server would run at, when it leaves the fraction to SGLang on an MLA or
    multimodal model; None when it names one or SGLang's default is harmless there.
    `hardware_profile`, `model_profile`: the simulator's profiles of the box and the model (the
    config's hardware.sim_profile, model.sim_profile), for a real SGLang launch, whose engine
    flags do not carry them."""
    version = spec.engine.sglang_version
    flags = [*server_flags(spec.server, version), *spec.engine.extra_args]
    if names_fraction(flags):
        return None
    sim_flags = [*flags, "--sim-sglang-version", version]
    if not spec.engine.simulated:
        sim_flags = [*server_flags(spec.server, version), "--sim-sglang-version", version]
        for flag, profile in (
            ("--sim-hardware", hardware_profile),
            ("--sim-target", model_profile),
        ):
            if profile:
                sim_flags += [flag, profile]
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            ns = build_parser(version).parse_args(sim_flags)
        except SystemExit:  # the launch check names what the parser refuses
            return None
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    name = target.architecture
    if not spec.engine.simulated:
        name = checkpoint_architecture(spec.server.model_path) or name
    facts = architecture(name)
    if not (facts.mla or facts.multimodal):
        return None
    try:
        args = resolve(ns, name, hw.gpu_memory_mib).args
    except (AssertionError, ValueError):  # a start-up refusal: the launch check says it
        return None
    plan = build_model(args, ns, "").memory_plan(args["mem_fraction_static"])
    return DefaultMemory(
        architecture=name,
        fraction=float(args["mem_fraction_static"]),
        kv_tokens=max(0, plan.kv_tokens),
        hardware=hw.name,
        simulated_kv=not spec.engine.simulated,
    )


def checkpoint_architecture(model_path: str) -> str | None:
    """`architectures[0]` of the checkpoint's config.json, on disk or in the hub's cache."""
    folder = cached_snapshot(model_path) if is_hub_id(model_path) else Path(model_path)
    config = folder / "config.json" if folder else None
    if config is None or not config.is_file():
        return None
    try:
        names = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError):
        return None
    return str(names[0]) if names else None
