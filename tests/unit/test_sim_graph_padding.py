"""The simulator's step cost follows SGLang 0.5.23's decode CUDA graphs (harness.sglang.graphs):
a batch replays the smallest captured size at or above it, and runs eager above the largest."""

from __future__ import annotations

import itertools

import pytest

from harness.sglang.graphs import (
    decode_batch_sizes,
    default_decode_max_bs,
    listed_batch_sizes,
    padded_batch,
)
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation
from harness.sim.model.profiles import EAGLE3_37K_TTT5, KIMI_K25, RTX_PRO_6000_PCIE

# cuda_graph_hook.py::generate_decode_cuda_graph_batch_sizes, the speculative list up to 48
SPEC_48 = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 40, 44, 48]


def model(spec: Speculation | None, max_bs: int = 48, graphs: bool = True) -> PerfModel:
    dep = Deployment(8, graphs, True, True, 0, max_bs, spec)
    return PerfModel(RTX_PRO_6000_PCIE, KIMI_K25, dep)


CHAIN = Speculation("EAGLE3", 3, 1, 4, EAGLE3_37K_TTT5)
TREE = Speculation("EAGLE3", 2, 4, 8, EAGLE3_37K_TTT5)


def test_speculation_captures_sglangs_list_up_to_the_request_pool():
    # 0.5.23 on a 96 GB card at TP 8 lists up to 512; the runner keeps what 48 requests fill
    assert decode_batch_sizes(512, True, request_pool=48) == SPEC_48
    # a pool between listed sizes is captured too (get_batch_sizes_to_capture adds it)
    assert decode_batch_sizes(512, True, request_pool=50)[-3:] == [44, 48, 50]
    assert decode_batch_sizes(None, True) == []
    assert decode_batch_sizes(512, True, 48, given=[64, 8, 1, 8]) == [1, 8, 48]


def test_without_speculation_the_list_is_coarser():
    listed = listed_batch_sizes(256, speculative=False)
    assert listed[:8] == [1, 2, 4, 8, 12, 16, 24, 32]
    assert listed[-1] == 256 and all(b - a == 8 for a, b in itertools.pairwise(listed[5:]))


@pytest.mark.parametrize(
    ("gpu_gib", "tp", "max_bs"),
    [(16, 1, 8), (24, 1, 48), (24, 8, 160), (40, 2, 32), (80, 1, 256), (96, 8, 512),
     (141, 8, 512), (180, 1, 512)],
)  # fmt: skip
def test_the_default_max_bs_follows_the_gpus_memory(gpu_gib, tp, max_bs):
    assert default_decode_max_bs(gpu_gib * 1024 - 1, tp) == max_bs


@pytest.mark.parametrize(
    ("batch", "padded"),
    [(1, 1), (8, 8), (9, 10), (31, 32), (33, 40), (41, 44), (48, 48), (49, None)],
)
def test_a_batch_pads_to_the_next_captured_size_and_runs_eager_above(batch, padded):
    assert padded_batch(batch, SPEC_48) == padded
    assert padded_batch(1, []) is None  # nothing captured: eager


@pytest.mark.parametrize("spec", [None, CHAIN, TREE], ids=["decode", "chain", "tree"])
def test_the_step_cost_is_a_staircase_with_jumps_at_the_captured_sizes(spec):
    """At context 0 (no KV to read: the one term that counts real rows only) the step cost is
    constant within a bucket and rises exactly when the batch crosses a captured size."""
    m = model(spec)
    cost = {b: m.decode_step_s(b, 0) for b in range(1, m.captured[-1] + 1)}
    for b in range(2, m.captured[-1] + 1):
        if b - 1 in m.captured:  # b starts the next bucket
            assert cost[b] > cost[b - 1], b
        else:
            assert cost[b] == cost[b - 1], b


def test_padding_rows_read_no_context_and_real_rows_do():
    m = model(CHAIN)
    inside = m.decode_step_s(34, 2000) - m.decode_step_s(33, 2000)  # both replay 40
    assert inside > 0  # one more real row reads its context
    jump = m.decode_step_s(33, 2000) - m.decode_step_s(32, 2000)  # 32 -> 40 rows
    assert jump > 5 * inside


def test_above_the_largest_captured_size_the_step_runs_eager():
    m = model(CHAIN)
    largest = m.captured[-1]
    eager_s = KIMI_K25.layers * RTX_PRO_6000_PCIE.eager_us_per_layer * 1e-6
    # one more request than the largest graph: its launches cost more than one row of work
    assert m.decode_step_s(largest + 1, 0) - m.decode_step_s(largest, 0) > eager_s
    # as a launch without graphs costs at that batch
    off = model(CHAIN, graphs=False)
    assert m.decode_step_s(largest + 1, 500) == off.decode_step_s(largest + 1, 500)
    # above it the cost grows with every request, no steps
    steps = [m.decode_step_s(b, 0) for b in range(largest + 1, largest + 6)]
    assert all(b > a for a, b in itertools.pairwise(steps))


def test_single_stream_replays_the_one_request_graph():
    for spec in (None, CHAIN, TREE):
        m = model(spec)
        assert m.graph_batch(1) == 1
        assert m.decode_step_s(1, 700) < model(spec, graphs=False).decode_step_s(1, 700)
