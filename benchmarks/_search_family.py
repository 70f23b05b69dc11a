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
  Kimi-K2.5 on Hopper adds 3.44 ms of latency-bound layer time per forward (forward_latency_ms,
  fitted on the H200; members leave it at 0, as the PCIe box does); a fixed per-step cost
  is what speculation amortises, so the wide range is the point (SP §5: with CUDA graphs bs-1
  decode is launch/communication bound).
- host_step_ms 0.6-1.5 (profiles 1.05); draft_host_ms 0.3-1.0 (profiles 0.3/0.5/0.8);
  spec_host_ms 1.0-6.0 (profiles 1.0/3.0/5.5; SP §5: draft step ~0.5-1 ms at bs 1).
- verify_token_us 30-600 per verified draft token (profiles 30/200/600; SP §2.3: verifying 4
  tokens costs 1.25x a decode step on an MoE at bs 1, TensorRT-LLM's 4 drafts 9.3 -> 14 ms).
- gpu_memory_mib: 96 GB (RTX PRO 6000), 141 GB (H200) or 180 GB (B200) cards; activation_mib
  5,000-9,000 (sglang.md / SP §6: "reserving 5-8 GB of memory for activations is typically
  sufficient"; profiles 6,300 and 7,500). attention_efficiency 0.25-1.0 (profiles 0.314 and 0.7).
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

The second part, "shapes" (`family(n, seed, shapes=True)`, search_efficiency --family-shapes):
member i is the plain family's member i (the same constants, from the same generator) with
acceptance and cost shapes drawn on top from a second generator seeded from the same seed
(`harness/sim/model/shapes.py`; none is calibrated). A model-based proposer that fits geometric
or per-depth chain acceptance, one shared sibling factor and a step cost linear in steps,
steps*topk and draft tokens assumes none of them:
- depth_shape, per depth k = 1..5 (the space's deepest): depth_decay**(k-1) times a walk
  whose step per depth is uniform 0.85-1.12, times a cliff factor 0.5-1.0 from a cliff depth
  2-5 on. Measured chain conditionals wander like that (SP §2.2: Llama-4-Maverick's EAGLE-3
  coding 0.83, 0.75, 0.79, 0.65, 0.66, 0.48, 0.50 from its accept lengths; SP §1: the K2.6
  drafter's 0.633, 0.638, 0.653 rise with depth) and drop past the depth a drafter trained on
  (EAGLE-3's 5 TTT steps); the cliff's low end is a stress test, not a measured figure.
- depth_fade 0-0.5: deeper drafts fade faster over the output. SP §1 (Test-Time Speculation):
  acceptance degrades with generation length as drafters train on short sequences; that it
  degrades faster with depth, and by how much, is an invented stress test.
- sibling_residuals per depth 0.70-0.95, each drawn on its own (the profiles' shared 0.79-0.88
  widened): a per-depth catch is an invented stress test of the shared factor.
- sibling_rank_power 0-1: the m-th sibling leaves residual ** ((m-1) ** -power), later siblings
  catch less, as the draft's top-k confidence falls with rank (EAGLE-2's dynamic tree ranks
  candidates by that confidence); the size is invented.
- verify_bucket_ms 0-3 per threshold of (t, 2t) draft tokens crossed, t one of 4, 6, 8: tile
  and CUDA-graph size jumps of the tree-attention and GEMM kernels (SP §2.3: SGLang captures the
  verify graph per batch with batch x draft tokens); invented sizes, up to a quarter of the PCIe
  box's 11 ms decode step.
- verify_token_exponent 1.0-1.4: the verify cost per draft token grows with the draft tokens
  (unchanged at 4), as a compute-bound verify past the GEMM ridge does (SP §2.3, Leviathan);
  the exponent is invented.
- draft_candidate_us 0-20 per candidate node scored (1 + topk + (steps-1) * topk**2 per
  iteration): the tree's top-k selection and bookkeeping; invented, up to ~1.4 ms at 5/4.

The third part, "memory-tight" (`family(n, seed, tight=True)`, search_efficiency
--family-memory-tight): member i is the plain family's member i with its card's memory redrawn
so that the weights fill most of it, searched under the load profile, where the fraction decides
how many requests the KV pool admits:
- weights_share 0.80-0.92 of gpu_memory_mib (the card is the weights per GPU over the share):
  Kimi-K2.5 INT4 with the drafter holds 75,191 MiB per GPU at TP 8, 0.92 of an 80 GB H100, A100
  or H800 (81,559 MiB) and 0.84 of a 94 GB H100 NVL (89,645 MiB); the plain family's 96 GB card
  is 0.77. On such a card the priors' 0.85 leaves the weights no KV room below a share of 0.85,
  and the pool at the fractions that start holds a few dozen requests or fewer: the fraction is
  what the load profile's highest levels read.
- A draw where nothing in the space (mem_fraction_static 0.82-0.94) starts a one-step chain,
  the least memory a speculative launch needs (the KV pool too small below, the activations and
  CUDA graphs over the rest above), has no optimum to search for: the share is drawn again from
  the same generator, at most MAX_REDRAWS times (the activation_mib of 5,000-9,000 MiB against
  the 6-8% of an 80 GB card the top of the range leaves is what rules those draws out).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, replace

from benchmarks._search_landscape import MULTI_TOKENS, Setup, server_for
from harness.server.command import server_flags
from harness.sim.model import profiles
from harness.sim.oracle import evaluate

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


SHAPE_RANGES = {
    "depth_step": (0.85, 1.12),
    "cliff_depth": (2, 5),
    "cliff_factor": (0.5, 1.0),
    "depth_fade": (0.0, 0.5),
    "sibling_residual": (0.70, 0.95),
    "sibling_rank_power": (0.0, 1.0),
    "verify_bucket_ms": (0.0, 3.0),
    "verify_bucket_first": (4, 6, 8),
    "verify_token_exponent": (1.0, 1.4),
    "draft_candidate_us": (0.0, 20.0),
}
SHAPE_DEPTHS = 5  # conf/search/eagle3_five.yaml: speculative_num_steps up to 5


def draw_shapes(rng: random.Random, depth_decay: float) -> dict[str, dict]:
    """One member's shapes (the module docstring), on top of its drawn `depth_decay`."""
    r = SHAPE_RANGES

    def u(key: str) -> float:
        return round(rng.uniform(*r[key]), 4)

    walk, shape = 1.0, []
    cliff_depth, cliff = rng.randint(*r["cliff_depth"]), u("cliff_factor")
    for k in range(SHAPE_DEPTHS):
        walk *= u("depth_step") if k else 1.0
        shape.append(round(depth_decay**k * walk * (cliff if k + 1 >= cliff_depth else 1.0), 4))
    drafter = {
        "depth_shape": shape,
        "depth_fade": u("depth_fade"),
        "sibling_residuals": [u("sibling_residual") for _ in range(SHAPE_DEPTHS)],
        "sibling_rank_power": u("sibling_rank_power"),
    }
    first = rng.choice(r["verify_bucket_first"])
    hardware = {
        "verify_bucket_ms": u("verify_bucket_ms"),
        "verify_bucket_tokens": [first, 2 * first],
        "verify_token_exponent": u("verify_token_exponent"),
        "draft_candidate_us": u("draft_candidate_us"),
    }
    return {"hardware": hardware, "drafter": drafter}


WEIGHTS_SHARE = (0.80, 0.92)  # the weights' share of the card, memory-tight members
MAX_REDRAWS = 50
TIGHT_GRID = tuple(round(0.82 + 0.01 * i, 2) for i in range(13))  # conf/search/eagle3_five.yaml


def weights_mib_per_gpu() -> float:
    """What one GPU holds of the family's fixed target and drafter at TP 8 (harness/sim's
    memory plan: the target's weights over TP, plus the drafter's per GPU)."""
    return profiles.KIMI_K25.weights_mib_total / 8 + profiles.EAGLE3_37K_TTT5.weights_mib_per_gpu


def starts_somewhere(constants: dict) -> bool:
    """Whether a one-step chain (the least memory a speculative launch needs) starts at some
    fraction of the space on the member's card, as the simulator's memory plan says."""
    setup = register(member_name(0, constants, "probe"), constants)
    chain = {"speculative_num_steps": 1, "speculative_eagle_topk": 1}
    chain |= {"speculative_num_draft_tokens": 2, "hicache_size": 0}
    for m in TIGHT_GRID:
        argv = [*server_flags(server_for(chain | {"mem_fraction_static": m}, setup))]
        if evaluate([*argv, *setup.sim_flags()], MULTI_TOKENS).outcome == "ok":
            return True
    return False


def draw_tight(rng: random.Random, constants: dict) -> dict:
    """The plain member `constants` on a card its weights fill (the module docstring)."""
    for _ in range(MAX_REDRAWS):
        share = round(rng.uniform(*WEIGHTS_SHARE), 4)
        hardware = {**constants["hardware"], "gpu_memory_mib": round(weights_mib_per_gpu() / share)}
        tight = {**constants, "hardware": hardware, "weights_share": share}
        if starts_somewhere(tight):
            return tight
    raise RuntimeError("no memory-tight card in MAX_REDRAWS draws starts a one-step chain")


def member_name(index: int, constants: dict, prefix: str = "family") -> str:
    digest = hashlib.sha256(json.dumps(constants, sort_keys=True).encode()).hexdigest()[:8]
    return f"{prefix}{index:02d}-{digest}"


def _tuples(group: dict) -> dict:
    """JSON's lists as the profiles' (hashable) tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in group.items()}


def register(name: str, constants: dict) -> Setup:
    """Add the member's profiles to the simulator's tables (in this process only); a
    memory-tight member's `weights_share` is a record of its draw, not a profile field."""
    base_hw, base_target = profiles.RTX_PRO_6000_PCIE, profiles.KIMI_K25
    base_drafter = profiles.EAGLE3_37K_TTT5
    hardware = replace(
        base_hw, name=name, untuned_nccl_factor=1.0, **_tuples(constants["hardware"])
    )
    target = replace(base_target, name=name, **constants["target"])
    drafter = replace(base_drafter, name=name, **_tuples(constants["drafter"]))
    profiles.HARDWARE[name] = hardware
    profiles.TARGETS[name] = target
    profiles.DRAFTERS[name] = drafter
    return Setup(name, name, name, name)


def family(
    n: int, seed: int = 0, shapes: bool = False, tight: bool = False
) -> list[tuple[Setup, dict]]:
    """`n` members drawn from `seed`, registered; the same (n, seed) gives the same members, and
    the first k of a larger family are the family of k. `shapes`: the second part, each member
    the plain one of its index with shapes drawn on top (named "shaped<i>-<hash>"); `tight`: the
    third, each the plain one on a card its weights fill (named "tight<i>-<hash>")."""
    rng, shape_rng = random.Random(seed), random.Random(f"shapes:{seed}")
    tight_rng = random.Random(f"tight:{seed}")
    members = []
    for index in range(n):
        constants = draw(rng)
        if shapes:
            extra = draw_shapes(shape_rng, constants["drafter"]["depth_decay"])
            for group, values in extra.items():
                constants[group] = {**constants[group], **values}
        if tight:
            constants = draw_tight(tight_rng, constants)
        prefix = "shaped" if shapes else "tight" if tight else "family"
        name = member_name(index, constants, prefix)
        members.append((register(name, constants), constants))
    return members


def describe_ranges(shapes: bool = False, tight: bool = False) -> dict:
    """The ranges as the JSON records them."""
    extra = {"shapes": SHAPE_RANGES, "shape_depths": SHAPE_DEPTHS} if shapes else {}
    if tight:
        extra["weights_share"] = WEIGHTS_SHARE
    return extra | {
        "hardware": {**HARDWARE_RANGES, "gpu_memory_mib": GPU_MEMORY_MIB},
        "target": TARGET_RANGES,
        "drafter": DRAFTER_RANGES,
        "fixed": {
            "target": asdict(profiles.KIMI_K25) | {"tp": 8},
            "drafter_weights_mib_per_gpu": profiles.EAGLE3_37K_TTT5.weights_mib_per_gpu,
        },
    }
