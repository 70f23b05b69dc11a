"""The simulator's adaptive policy against tier switches computed by hand from SGLang 0.5.23's
rules (adaptive_spec_params.py: EMA, warm-up, update interval, hysteresis, per-batch-size
slots, 0 steps), and the PerfModel of an adaptive server costing each step at the steps active
for it."""

from __future__ import annotations

import pytest

from harness.sim.cli import build_parser
from harness.sim.model.adaptive import SWITCH_COST_S, AdaptivePerfModel, AdaptivePolicy
from harness.sim.model.adaptive_args import adaptive_config, resolve_adaptive
from harness.sim.oracle import build_model

# Round numbers so the EMA is exact by hand: alpha 0.5, warm-up 2, update every 2 batches.
CONFIG = {
    "1": {
        "candidate_steps": [1, 3, 5],
        "ema_alpha": 0.5,
        "warmup_batches": 2,
        "update_interval": 2,
        "up_hysteresis": 0.0,
        "down_hysteresis": 0.0,
    },
    "8": {"candidate_steps": [0, 1], "ema_alpha": 0.5, "warmup_batches": 0, "update_interval": 1},
}


def test_tier_switches_match_the_hand_computation():
    policy = AdaptivePolicy(3, CONFIG, cuda_graph_bs=[])
    one, eight = policy.slots[1], policy.slots[8]
    assert (one.current_steps, one.ema_accept_len) == (3, 2.0)  # EMA starts at steps - 1
    assert eight.current_steps == 1  # 3 is no candidate of [0, 1]: the middle one
    feed = [
        # (accepted drafts per request, batch size) -> EMA after, switch returned
        ([4], 3.0, None),  # batch 1: warm-up
        ([4], 3.5, None),  # batch 2: warm-up
        ([4], 3.75, None),  # batch 3: (3-2) % 2 != 0
        ([4], 3.875, 5),  # batch 4: update; 3.875 > 3 - 0.5 -> up to 5 (last candidate)
        ([0], 1.9375, None),
        ([0], 0.96875, 3),  # down: <= 3 - 0.5, not <= 1 - 0.5 -> 3
        ([1, 2], 1.234375, None),  # a batch of 2 is slot "1"'s; mean 1.5
        ([0, 0], 0.6171875, None),  # update: 0.617 > 0.5 and <= 2.5: stays at 3
    ]
    for accepted, ema, switch in feed:
        assert policy.on_verify_complete(accepted, len(accepted)) == switch
        assert one.ema_accept_len == pytest.approx(ema, abs=1e-12)
    assert policy.steps_for_batch(1) == 3
    # Slot "8": no warm-up, every batch; 0 accepted drafts drops it to 0 (threshold 0.5)...
    assert policy.on_verify_complete([0] * 8, 8) == 0
    assert eight.ema_accept_len == 0.0
    # ...where nothing is observed (the EMA stays), and the next update probes 1 again.
    assert policy.on_verify_complete([0] * 8, 8) == 1
    assert eight.ema_accept_len == 0.0
    assert policy.steps_for_batch(8) == 1 and policy.steps_for_batch(1) == 3


def test_sglangs_default_config_holds_its_tiers_with_default_knobs():
    """The built-in default: warm-up 10, every 5th batch after; the 1-slot's down hysteresis
    -0.25 holds 3 steps at an EMA of 1.3 (drop only at <= 1 - 0.5 - 0.25)."""
    policy = AdaptivePolicy(3, adaptive_config(None), cuda_graph_bs=[])
    slot = policy.slots[1]
    changes = [policy.on_verify_complete([1], 1) for _ in range(15)]
    assert changes[:14] == [None] * 14 and changes[14] is None  # EMA 2 -> ~1.07: holds 3
    assert slot.current_steps == 3
    for _ in range(30):
        policy.on_verify_complete([0], 1)
    assert slot.current_steps == 1  # EMA ~0.0 <= 0.25: down to the floor candidate
    assert policy.steps_for_batch(64) == 0 and policy.steps_for_batch(200) == 0


def test_batches_are_padded_to_the_captured_size_then_floored_to_a_slot():
    config = {k: {"candidate_steps": [i]} for i, k in enumerate(("1", "8", "32"))}
    policy = AdaptivePolicy(0, config, cuda_graph_bs=[1, 2, 4, 8, 16, 32])
    assert [policy.steps_for_batch(b) for b in (1, 3, 5, 8, 9, 20, 32, 100)] == [
        0,
        0,
        1,
        1,
        1,
        2,
        2,
        2,
    ]
    unpadded = AdaptivePolicy(0, config, cuda_graph_bs=[])
    assert unpadded.steps_for_batch(5) == 0 and unpadded.steps_for_batch(20) == 1


def model(*flags: str):
    argv = [
        "--model-path", "/m", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/d", "--speculative-adaptive", *flags,
    ]  # fmt: skip
    from harness.sim.cli import resolve
    from harness.sim.model.profiles import HARDWARE, TARGETS

    ns = build_parser().parse_args(argv)
    args = resolve(
        ns, TARGETS[ns.sim_target].architecture, HARDWARE[ns.sim_hardware].gpu_memory_mib
    )
    return build_model(args.args, ns, "LL"), args


def test_an_adaptive_launch_starts_at_the_middle_candidate_with_topk_1():
    m, resolved = model()
    assert isinstance(m, AdaptivePerfModel)
    a = resolved.args
    assert (a["speculative_num_steps"], a["speculative_eagle_topk"]) == (3, 1)
    assert a["speculative_num_draft_tokens"] == 4
    with pytest.raises(ValueError, match="num-steps=2 is not in the adaptive config"):
        model("--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "3")  # fmt: skip
    _, fallback = model("--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
                        "--speculative-num-draft-tokens", "8")  # fmt: skip
    assert fallback.args["speculative_adaptive"] is False  # SGLang serves static, warns
    assert any("speculative_adaptive disabled: speculative_eagle_topk=4" in w
               for w in fallback.warnings)  # fmt: skip


def test_each_decode_step_costs_and_accepts_at_its_active_steps(tmp_path, monkeypatch):
    path = tmp_path / "a.json"
    path.write_text(
        '{"1": {"candidate_steps": [1, 3], "warmup_batches": 0, "update_interval": 1,'
        ' "ema_alpha": 1.0}, "8": {"candidate_steps": [0]}}'
    )
    m, _ = model("--speculative-adaptive-config", str(path), "--disable-overlap-schedule")
    assert isinstance(m, AdaptivePerfModel) and m.current == 1  # candidates [0, 1, 3]: middle 1
    scripted = iter([2, 3])  # tokens per request of the next two single-stream steps
    for steps in (1, 3):
        monkeypatch.setattr(m.at(steps), "sample_tokens", lambda *a: next(scripted))
    # Step 1 at 1 step: the policy has seen nothing yet.
    assert m.decode_step_s(1, 100) == m.at(1).decode_step_s(1, 100)
    m.sample_tokens(None, 0, 1.0)  # 1 accepted draft: EMA 1.0 > 1 - 0.5 -> up to 3
    assert m.decode_step_s(1, 100) == pytest.approx(m.at(3).decode_step_s(1, 100) + SWITCH_COST_S)
    assert m.current == 3 and m.switches == 1
    m.sample_tokens(None, 0, 1.0)  # 2 accepted drafts at 3 steps: slot "1" holds 3
    # A batch of 8 is slot "8"'s: drafting off, a 1-token verify + draft extend.
    assert m.decode_step_s(8, 100) == pytest.approx(m.at(0).decode_step_s(8, 100) + SWITCH_COST_S)
    assert m.at(0).decode_step_s(8, 100) < m.at(3).decode_step_s(8, 100)
    assert m.at(0).expected_accept_len() == 1.0
    assert m.steps_used == {1: 1, 3: 1, 0: 1} and m.switches == 2
    assert m.policy.slots[1].current_steps == 3


def test_every_candidates_graphs_take_memory():
    m, a = model()
    static = {**a.args, "speculative_adaptive": False}
    ns = build_parser().parse_args(["--model-path", "/m"])
    plain = build_model(static, ns, "LL")
    assert not isinstance(plain, AdaptivePerfModel)
    mem = a.args["mem_fraction_static"]
    assert m.memory_plan(mem).graph_mib > plain.memory_plan(mem).graph_mib


def test_resolve_leaves_a_static_launch_alone():
    args = {"speculative_adaptive": False, "speculative_num_steps": None}
    resolve_adaptive(args, print)
    assert args["speculative_num_steps"] is None
