"""Landscapes nobody tuned: a seeded family of simulated deployments (search_efficiency --family).

Each member is Kimi-K2.5 INT4 at TP 8 (the project's deployment) on a drawn box with a drawn
EAGLE-3 drafter: every constant below is drawn uniformly from its range, independently, from a
seeded generator, and registered with the simulator's profiles under a name that carries a hash
of the constants (so the oracle's cache never mixes two draws). The ranges span the simulator's
named profiles and the published numbers in shared/reference/speculative-performance.md (SP §n),
shared/reference/seed-figures.md (SF) and shared/reference/sglang.md:

Hardware (per GPU; `harness/sim/model/profiles.py` HardwareProfile):
- hbm_gb_s 1,500-8,000: RTX PRO 6000 GDDR7 1,792, H100 3,350, H200 4,800, B200 8,000 (specs).
- allreduce_latency_us 15-60, bus_gb_s 20-400: NVSwitch one-shot (H200 profile 20, estimate) to
  PCIe without NVLink (48, calibrated to SF row 2); PCIe Gen5 ring ~20 GB/s to NVLink ~300-400.
- tflops 150-900 effective: well below the 989 dense BF16 peak of H100/H200 (estimate).
- kernel_us_per_layer 15-90: the profiles' 23.1 (H100 fitted, the H200 by rule), 30 (PCIe);
  the H200 adds a named 3.44 ms step residual (the old 83 us per layer); a fixed per-step cost
  is what speculation amortises, so the wide range is the point (SP §5: with CUDA graphs bs-1
  decode is launch/communication bound).
- host_step_ms 0.6-1.5 (profiles 1.05); draft_host_ms 0.3-1.0 (profiles 0.3/0.5/0.8);
  spec_host_ms 1.0-6.0 (profiles 1.0/3.0/5.5; SP §5: draft step ~0.5-1 ms at bs 1).
- verify_token_us 30-600 per verified draft token (profiles 30/200/600; SP §2.3: verifying 4
  tokens costs 1.25x a decode step on an MoE at bs 1, TensorRT-LLM's 4 drafts 9.3 -> 14 ms).
- gpu_memory_mib: 96 GB (RTX PRO 6000), 141 GB (H200) or 180 GB (B200) cards; activation_mib
  5,000-9,000 (sglang.md / SP §6: "reserving 5-8 GB of memory for activations is typically
  sufficient"; profiles 6,300 and 7,500). attention_efficiency 0.25-1.0 (profiles 0.31 and 0.7).
Target (Kimi-K2.5's shape is fixed; TargetProfile):
- expert_correlation 0.55-0.85: Cohere's ~2.5x unique expert bytes for 4 verify tokens is 0.66
  (SP §2.3); MoE-Spec has wide trees approach every expert (higher).
- load_s 60-240: start-up, weights from page cache to cold-ish loads (profile 90, estimate).
Drafter (DrafterProfile: a_k = first_accept * depth_decay**(k-1), siblings, fade):
- first_accept 0.50-0.85: K2.6 MLA drafter's held-out first position 0.633-0.648; lightseek's
  K2.5 drafter implies 0.64 (CEval) to 0.85-0.88 (math/code) iid-equivalent at 3/1/4 (SP §0,
  §3.3); the simulator's drafters 0.55-0.80.
- depth_decay 0.80-1.00: EAGLE-3's per-position rate stays almost flat (SP §1, Fig. 7); the
  simulator's drafters 0.85-0.97.
- sibling_residual 0.75-0.92 (the simulator's drafters 0.79-0.88; a second branch catches
  8-25% of what the first missed).
- long_context_tokens 4,000-20,000 (drafters fade on long outputs, SP §1; profiles 6K-20K).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, replace

from benchmarks._search_landscape import Setup
from harness.sim.model import profiles

HARDWARE_RANGES = {
    "hbm_gb_s": (1_500.0, 8_000.0),
    "allreduce_latency_us": (15.0, 60.0),
    "bus_gb_s": (20.0, 400.0),
    "tflops": (150.0, 900.0),
    "kernel_us_per_layer": (15.0, 90.0),
    "host_step_ms": (0.6, 1.5),
    "draft_host_ms": (0.3, 1.0),
    "spec_host_ms": (1.0, 6.0),
    "verify_token_us": (30.0, 600.0),
    "activation_mib": (5_000.0, 9_000.0),
    "attention_efficiency": (0.25, 1.0),
}
GPU_MEMORY_MIB = (97_887.0, 143_771.0, 183_359.0)  # 96 GB, 141 GB, 180 GB cards
TARGET_RANGES = {"expert_correlation": (0.55, 0.85), "load_s": (60.0, 240.0)}
DRAFTER_RANGES = {
    "first_accept": (0.50, 0.85),
    "depth_decay": (0.80, 1.00),
    "sibling_residual": (0.75, 0.92),
    "long_context_tokens": (4_000.0, 20_000.0),
}


def draw(rng: random.Random) -> dict[str, dict[str, float]]:
    """One member's constants, each uniform in its range."""

    def uniform(ranges: dict[str, tuple[float, float]]) -> dict[str, float]:
        return {k: round(rng.uniform(lo, hi), 4) for k, (lo, hi) in ranges.items()}

    hardware = uniform(HARDWARE_RANGES)
    hardware["gpu_memory_mib"] = rng.choice(GPU_MEMORY_MIB)
    return {
        "hardware": hardware,
        "target": uniform(TARGET_RANGES),
        "drafter": uniform(DRAFTER_RANGES),
    }


def member_name(index: int, constants: dict) -> str:
    digest = hashlib.sha256(json.dumps(constants, sort_keys=True).encode()).hexdigest()[:8]
    return f"family{index:02d}-{digest}"


def register(name: str, constants: dict) -> Setup:
    """Add the member's profiles to the simulator's tables (in this process only)."""
    base_hw, base_target = profiles.RTX_PRO_6000_PCIE, profiles.KIMI_K25
    base_drafter = profiles.EAGLE3_37K_TTT5
    hardware = replace(base_hw, name=name, untuned_nccl_factor=1.0, **constants["hardware"])
    target = replace(base_target, name=name, **constants["target"])
    drafter = replace(base_drafter, name=name, **constants["drafter"])
    profiles.HARDWARE[name] = hardware
    profiles.TARGETS[name] = target
    profiles.DRAFTERS[name] = drafter
    return Setup(name, name, name, name)


def family(n: int, seed: int = 0) -> list[tuple[Setup, dict]]:
    """`n` members drawn from `seed`, registered; the same (n, seed) gives the same members, and
    the first k of a larger family are the family of k."""
    rng = random.Random(seed)
    members = []
    for index in range(n):
        constants = draw(rng)
        members.append((register(member_name(index, constants), constants), constants))
    return members


def describe_ranges() -> dict:
    """The ranges as the JSON records them."""
    return {
        "hardware": {**HARDWARE_RANGES, "gpu_memory_mib": GPU_MEMORY_MIB},
        "target": TARGET_RANGES,
        "drafter": DRAFTER_RANGES,
        "fixed": {
            "target": asdict(profiles.KIMI_K25) | {"tp": 8},
            "drafter_weights_mib_per_gpu": profiles.EAGLE3_37K_TTT5.weights_mib_per_gpu,
        },
    }
