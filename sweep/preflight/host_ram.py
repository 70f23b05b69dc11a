"""Host memory for the sweep that will run: the HiCache pools at the sizes the memory policy
launches, SGLang's reserve beside them, and the server's own processes.

What a server needs of host memory (SGLang 0.5.23, `harness.sglang.host_memory`): `--hicache-size`
GB of pinned pool per TP rank, which SGLang allocates only where the host's available memory less
a 10 GiB reserve holds every rank's pool; and the memory of its processes (a scheduler per rank,
the tokenizer and detokenizer), which preflight cannot measure before they run: that is
`model.host_ram_gb`, an assumption (64 GB unless the model's config sets it). The checkpoint is
not part of it: SGLang reads it through the page cache, which the kernel reclaims and SGLang
counts as available. Whether it fits beside the rest decides only whether the next trial's start
reads it from the page cache or from disk, so the line says which.

The judgment follows `sweep.preflight.launched`: FAIL where even the smallest HiCache size the
sampler proposes (the held one, where the policy holds it) does not fit; warn where the largest
any trial launches, an enqueued prior's included, does not.
"""

from __future__ import annotations

import math

import psutil
from omegaconf import DictConfig

from harness.sglang.host_memory import HICACHE_RESERVE_BYTES, HICACHE_UNIT_BYTES
from sweep.preflight.check import Check
from sweep.preflight.launched import Knob
from sweep.preflight.weights import model_weights

GB = 1e9
RESERVE_GB = HICACHE_RESERVE_BYTES / GB


def available(cfg: DictConfig) -> tuple[float, str]:
    """Host memory the sweep's servers get, in GB, and the figure with its source, in words."""
    if cfg.engine.name == "sim":
        gb = float(cfg.hardware.host_ram_gb)
        return gb, f"the simulated box's {gb:.0f} GB (hardware.host_ram_gb)"
    # As SGLang counts it (mem_cache/host_memory.py): free memory and reclaimable page cache.
    gb = psutil.virtual_memory().available / GB
    return gb, f"{gb:.0f} GB available on this machine"


def need_gb(hicache_gb: float, tp: int, processes_gb: float) -> float:
    """Host memory a server with `hicache_gb` per rank needs, in GB."""
    pools = hicache_gb * HICACHE_UNIT_BYTES / GB * tp
    return pools + (RESERVE_GB if hicache_gb > 0 else 0.0) + processes_gb


def _terms(hicache_gb: float, tp: int, processes_gb: float, why: str) -> str:
    """The sum, each term with its source."""
    processes = f"the server's processes {processes_gb:g} GB (assumed: model.host_ram_gb)"
    if hicache_gb <= 0:
        return f"HiCache off ({why}) + {processes} = {need_gb(0, tp, processes_gb):.0f} GB"
    total = need_gb(hicache_gb, tp, processes_gb)
    return (
        f"HiCache {hicache_gb:g} GB x TP {tp} (pinned, per rank; {why}) + SGLang's "
        f"{RESERVE_GB:.1f} GB reserve + {processes} = {total:.0f} GB"
    )


def _page_cache(cfg: DictConfig, spare_gb: float) -> str:
    """Where the checkpoint is read from at the next trial's start."""
    weights = model_weights(cfg)
    if weights is None:
        return "the checkpoint is read through the page cache, not held"
    size = weights.total_bytes / GB
    stays = (
        "it stays cached between trials"
        if spare_gb >= size
        else "it does not fit beside them, so each trial's start reads it from disk"
    )
    return (
        f"the checkpoint ({size:.3g} GB; weights line) is read through the page cache, not "
        f"held: {stays}"
    )


def largest_fitting(have_gb: float, tp: int, processes_gb: float) -> int:
    """The largest whole --hicache-size (GB per rank) that fits; 0 where none does."""
    return max(0, math.floor((have_gb - processes_gb - RESERVE_GB) / tp))


def check_host_ram(cfg: DictConfig, hicache: Knob, have: tuple[float, str] | None = None) -> Check:
    """`host ram` at the HiCache sizes the sweep launches (`hicache`); `have`: the host memory
    in GB and the figure with its source (default: `available(cfg)`)."""
    have_gb, of = have if have is not None else available(cfg)
    tp, processes = int(cfg.model.tp), float(cfg.model.host_ram_gb)
    smallest, largest = min(hicache.sampled), max(hicache.launched)
    fitting = largest_fitting(have_gb, tp, processes)
    why = hicache.why
    if largest > max(hicache.sampled):  # a fixed parameter of an enqueued prior
        why += f"; an enqueued trial (search.enqueue) launches at {largest:g} GB"
    if need_gb(smallest, tp, processes) > have_gb:
        return Check(
            "host ram",
            "fail",
            f"{_terms(smallest, tp, processes, why)} needed, more than {of}",
            "a box with more memory, or a lower model.host_ram_gb where the server's processes "
            "need less"
            if smallest <= 0 or fitting <= 0
            else f"keep search.space.hicache_size at or below {fitting} GB per rank",
        )
    if need_gb(largest, tp, processes) > have_gb:
        return Check(
            "host ram",
            "warn",
            f"{_terms(largest, tp, processes, why)} needed, more than {of}: launches at "
            f"HiCache {largest:g} GB stop for host memory (at {smallest:g} GB: "
            f"{need_gb(smallest, tp, processes):.0f} GB)",
            f"keep search.space.hicache_size (and search.enqueue) at or below {fitting} GB per "
            "rank",
        )
    spare = have_gb - need_gb(largest, tp, processes)
    return Check(
        "host ram",
        "pass",
        f"{_terms(largest, tp, processes, why)} of {of}; " + _page_cache(cfg, spare),
    )
