"""The model's weights, each figure with its source, and whether a GPU's static share holds them.

The checkpoint's size is read from the files SGLang loads (`harness.sglang.host_memory`) under
`model.path`, or under a hub id's snapshot in the local Hugging Face cache. A rank keeps 1/TP of
it on its GPU: SGLang's tensor parallelism splits each layer's weights (column- and row-parallel
projections, the experts, the vocabulary) evenly across the TP ranks; the few tensors it
replicates (norms, MLA's low-rank projections) make a rank's real share slightly larger. Where no
checkpoint is readable here (the shipped placeholder paths, a hub id not in the cache), the
figure is the simulator's profile of the model (`model.sim_profile`, calibrated on the seeds'
box), and the line says so; without either it is not judged.

SGLang's static share of a GPU is `mem_fraction_static` x its memory; the weights are loaded into
it and the KV pool gets what they leave. So a fraction at which one rank's weights fill the
static share cannot start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from harness.drafter_gate import is_hub_id, local_checkpoint
from harness.sglang.host_memory import weight_files
from harness.sim.model.profiles import MIB, TARGETS
from sweep.preflight.check import Check
from sweep.preflight.launched import Knob

GIB = 2**30


def gib(size: float) -> str:
    """Bytes in GiB, or in MiB below one GiB (a test's checkpoint is not 0.0 GiB)."""
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / MIB:.1f} MiB"


@dataclass(frozen=True)
class Weights:
    """The checkpoint's bytes over all ranks, and where that figure comes from."""

    total_bytes: float
    source: str
    read: bool  # read from its files here (else assumed)

    def per_gpu(self, tp: int) -> float:
        return self.total_bytes / tp


def _unreadable(path: str) -> str:
    if Path(path).expanduser().is_dir():
        return f"no *.safetensors or *.bin under {path}"
    if path.startswith(("/", "./", "../", "~")) or not is_hub_id(path):
        return f"{path} is not on this machine"
    return f"{path} is a hub id not in the local Hugging Face cache"


def model_weights(cfg: DictConfig) -> Weights | None:
    """The model's checkpoint size: read from its files, else the simulator's profile of it, else
    None (nothing says)."""
    path = str(cfg.model.path)
    folder = local_checkpoint(path)
    if folder is not None:
        kind, files = weight_files(folder)
        if files:
            where = path if Path(path).expanduser() == folder else f"{path}'s cached snapshot"
            count = f"{len(files)} {kind} file" + ("s" if len(files) > 1 else "")
            return Weights(sum(f.stat().st_size for f in files), f"{count} under {where}", True)
    profile = cfg.model.get("sim_profile")
    if profile not in TARGETS:
        return None
    return Weights(
        TARGETS[profile].weights_mib_total * MIB,
        f"assumed: the simulator's {profile} profile, model.sim_profile, as {_unreadable(path)}",
        False,
    )


def _gpu_memory(cfg: DictConfig, inventory: dict | None) -> tuple[float, str]:
    """One GPU's memory in bytes: NVML's smallest total on a GPU box, else the config's."""
    if cfg.engine.name != "sim" and inventory and inventory.get("total_mib"):
        return min(inventory["total_mib"]) * MIB, "NVML"
    return float(cfg.hardware.gpu_memory_gb) * GIB, "hardware.gpu_memory_gb"


def check_weights(cfg: DictConfig, fraction: Knob | None, inventory: dict | None = None) -> Check:
    """`weights`: one rank's share against the static share at the fractions the sweep launches
    (`fraction`, as the memory policy holds or searches it). FAIL where no fraction the sampler
    proposes holds it, warn where some launch's fraction does not. An assumed figure does not
    fail a sweep on GPUs (it warns): only the simulator runs exactly its profile."""
    weights = model_weights(cfg)
    if weights is None:
        why = f"{_unreadable(str(cfg.model.path))} and model.sim_profile names no profile"
        return Check("weights", "pass", f"not judged: {why}")
    status, message, fix = _verdict(cfg, weights, fraction, inventory)
    if status == "fail" and not weights.read and cfg.engine.name != "sim":
        status = "warn"
        fix += " (the figure is assumed: set model.sim_profile to this model's, or model.path)"
    return Check("weights", status, message, fix)


def _verdict(
    cfg: DictConfig, weights: Weights, fraction: Knob | None, inventory: dict | None
) -> tuple[str, str, str]:
    tp = int(cfg.model.tp)
    share = weights.per_gpu(tp)
    gpu, gpu_source = _gpu_memory(cfg, inventory)
    figure = f"{gib(share)} per GPU ({gib(weights.total_bytes)} / TP {tp}; {weights.source})"
    bigger = "more GPUs (model.tp) or a smaller model"
    if fraction is None:  # left to SGLang: the mem fraction check says what it picks
        message = (
            f"{figure} on {gpu / GIB:.4g} GiB GPUs ({gpu_source}); the fraction is left to "
            "SGLang (mem fraction)"
        )
        return ("fail", message, bigger) if share >= gpu else ("pass", message, "")
    lowest = min(fraction.launched)
    detail = (
        f"{figure} in {gib(lowest * gpu)} static at {fraction.name} {lowest:g} x "
        f"{gpu / GIB:.4g} GiB ({gpu_source})"
    )
    why = f"the fraction {fraction.why}"
    if share < lowest * gpu:
        left = gib(lowest * gpu - share)
        return "pass", f"{detail}: {left} left for the KV pool and the drafter; {why}", ""
    needed = share / gpu  # the fraction at which the weights alone fill the static share
    if not any(share < f * gpu for f in fraction.sampled):
        message = f"{detail}: they fill it, and no fraction the sweep launches holds them; {why}"
        raise_it = f"a fraction above {needed:.2f} (search.space.{fraction.name}), or {bigger}"
        return "fail", message, raise_it if needed < 1 else bigger
    fits = min(f for f in fraction.launched if share < f * gpu)
    message = f"{detail}: they fill it, so launches below {fits:g} cannot start; {why}"
    return "warn", message, f"raise the low end of search.space.{fraction.name} above {needed:.2f}"
