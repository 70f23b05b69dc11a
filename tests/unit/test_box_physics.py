"""Boxes obey physics between themselves.

For the same target, TP size and configuration, a box whose GPUs have no more memory bandwidth,
no more FLOPs and no faster interconnect (no lower allreduce latency, no higher bus bandwidth)
is not faster. Checked three ways: every shipped profile and every member of the search
benchmark's family against a copy of itself with slower GPUs; every pair of shipped profiles
where one's GPUs are no better than the other's (the H100 and the H200 are the same Hopper chip
with less and slower memory); and the H100 against the H200 on Kimi-K2.5, the case where the
model once had it backwards (a per-forward cost fitted on the H200 that the H100 did not carry).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations
from pathlib import Path

import pytest
import yaml

from benchmarks import _search_family
from harness.sim.model import profiles
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation
from harness.sim.oracle import expected_decode

# (steps, topk, draft tokens), None the baseline: chains, a small tree, wide trees.
CONFIGS = [None, (1, 1, 2), (3, 1, 4), (5, 1, 6), (2, 2, 5), (3, 4, 10), (3, 4, 12), (4, 4, 16)]
NAMED = {"kimi_k25": (8, "eagle3_37k_ttt5"), "llama31_8b": (1, "eagle3_llama31_8b")}
OUTPUT_TOKENS = 2048  # conf/benchmark/reasoning_2048.yaml
# The profiles the conf's hardware group runs the simulator on.
SHIPPED = sorted(
    {
        yaml.safe_load(f.read_text())["sim_profile"]
        for f in (Path(__file__).parents[2] / "conf/hardware").glob("*.yaml")
    }
)


def tok_s(hw, target, drafter, tp: int, config) -> float:
    """Single-stream decode tok/s of one launch (the oracle's expected stream)."""
    spec = Speculation("EAGLE3", *config, drafter) if config else None
    deployment = Deployment(
        tp=tp,
        cuda_graph=True,
        overlap=True,
        nccl_tuned=True,
        hicache_size_gb=0,
        graph_max_bs=48,
        speculation=spec,
    )
    return expected_decode(PerfModel(hw, target, deployment), OUTPUT_TOKENS)[0]


def gpus_no_better(slow: profiles.HardwareProfile, fast: profiles.HardwareProfile) -> bool:
    return (
        slow.hbm_gb_s <= fast.hbm_gb_s
        and slow.tflops <= fast.tflops
        and slow.bus_gb_s <= fast.bus_gb_s
        and slow.allreduce_latency_us >= fast.allreduce_latency_us
        and slow.untuned_nccl_factor >= fast.untuned_nccl_factor
    )


def work_no_cheaper(slow, fast, target: str) -> bool:
    """What the model charges per architecture for SGLang's work on `target` (kernel launches
    and profiles.ARCH_WORK_FIELDS) is no cheaper on `slow`: across architectures the kernels
    and host path differ, so only a box that is no better there either must be no faster."""
    slow, fast = profiles.for_target(slow, target), profiles.for_target(fast, target)
    fields = ("kernel_us_per_layer", *profiles.ARCH_WORK_FIELDS)
    return all(getattr(slow, f) >= getattr(fast, f) for f in fields)


def with_slower_gpus(hw: profiles.HardwareProfile) -> profiles.HardwareProfile:
    return replace(
        hw,
        name=f"{hw.name}-slower",
        gpu_memory_mib=hw.gpu_memory_mib * 0.8,
        hbm_gb_s=hw.hbm_gb_s * 0.7,
        tflops=hw.tflops * 0.7,
        bus_gb_s=hw.bus_gb_s * 0.7,
        allreduce_latency_us=hw.allreduce_latency_us * 1.3,
    )


def assert_not_faster(slow_hw, fast_hw, target, drafter, tp: int) -> None:
    for config in CONFIGS:
        slow = tok_s(slow_hw, target, drafter, tp, config)
        fast = tok_s(fast_hw, target, drafter, tp, config)
        assert slow <= fast * (1 + 1e-9), (slow_hw.name, fast_hw.name, target.name, config)


@pytest.mark.parametrize("target_name", NAMED)
@pytest.mark.parametrize("box", SHIPPED)
def test_a_shipped_box_with_slower_gpus_is_not_faster(box, target_name):
    tp, drafter = NAMED[target_name]
    hw, target = profiles.HARDWARE[box], profiles.TARGETS[target_name]
    assert_not_faster(with_slower_gpus(hw), hw, target, profiles.DRAFTERS[drafter], tp)


@pytest.fixture(scope="module")
def family():
    """The search benchmark's drawn deployments (plain and shaped), registered with the
    simulator's tables for the module and taken out again after it."""
    tables = (profiles.HARDWARE, profiles.TARGETS, profiles.DRAFTERS)
    saved = [dict(t) for t in tables]
    members = [s for shapes in (False, True) for s, _ in _search_family.family(8, 0, shapes)]
    yield members
    for table, old in zip(tables, saved, strict=True):
        table.clear()
        table.update(old)


def test_a_family_box_with_slower_gpus_is_not_faster(family):
    for setup in family:
        hw = profiles.HARDWARE[setup.hardware]
        target, drafter = profiles.TARGETS[setup.target], profiles.DRAFTERS[setup.drafter]
        assert_not_faster(with_slower_gpus(hw), hw, target, drafter, setup.tp)


def dominated_pairs(target: str) -> list[tuple[str, str]]:
    """(slow, fast) pairs of shipped boxes where `slow` must be no faster on `target`."""
    pairs = []
    for slow, fast in permutations([profiles.HARDWARE[name] for name in SHIPPED], 2):
        same_arch = slow.compute == fast.compute
        if gpus_no_better(slow, fast) and (same_arch or work_no_cheaper(slow, fast, target)):
            pairs.append((slow.name, fast.name))
    return pairs


@pytest.mark.parametrize("target_name", NAMED)
def test_a_shipped_box_whose_gpus_are_no_better_is_not_faster(target_name):
    tp, drafter = NAMED[target_name]
    pairs = dominated_pairs(target_name)
    # The H100 SXM is the H200's chip and fabric with 80 GB at 3.35 TB/s instead of 141 at 4.8.
    assert ("h100_sxm", "h200_nvlink") in pairs
    for slow, fast in pairs:
        assert_not_faster(
            profiles.HARDWARE[slow],
            profiles.HARDWARE[fast],
            profiles.TARGETS[target_name],
            profiles.DRAFTERS[drafter],
            tp,
        )


def test_hopper_boxes_charge_one_target_the_same_work():
    """Kimi-K2.5's latency-bound layer time and host costs, fitted or estimated on the H200,
    are the H100's too when it runs Kimi-K2.5 (and Llama-3.1-8B's, from the H100, the H200's)."""
    h100, h200 = profiles.H100_SXM, profiles.H200_NVLINK
    for target in NAMED:
        a, b = profiles.for_target(h100, target), profiles.for_target(h200, target)
        for field in profiles.ARCH_WORK_FIELDS:
            assert getattr(a, field) == getattr(b, field), (target, field)
    assert profiles.for_target(h100, "kimi_k25").forward_latency_ms == h200.forward_latency_ms
    assert profiles.for_target(h200, "llama31_8b").forward_latency_ms == 0.0


def test_eight_h100s_run_kimi_no_faster_than_eight_h200s():
    kimi, drafter = profiles.KIMI_K25, profiles.EAGLE3_37K_TTT5
    for config in CONFIGS:
        h100 = tok_s(profiles.H100_SXM, kimi, drafter, 8, config)
        h200 = tok_s(profiles.H200_NVLINK, kimi, drafter, 8, config)
        # slower HBM is all that differs: the weights' share of a step, a few percent
        assert 0.85 * h200 < h100 <= h200, config
