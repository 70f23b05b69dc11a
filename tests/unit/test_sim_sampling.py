"""The simulator's acceptance responds to the request's temperature (docs/simulator.md)."""

from __future__ import annotations

import pytest

from harness.sim.api import chat, generate
from harness.sim.engine import Engine, InstantClock
from harness.sim.model.perf_model import Deployment, PerfModel, Speculation, sampled_acceptance
from harness.sim.model.profiles import EAGLE3_37K_TTT5, KIMI_K25, RTX_PRO_6000_PCIE


def speculative_model() -> PerfModel:
    spec = Speculation("EAGLE3", 3, 1, 4, EAGLE3_37K_TTT5)
    dep = Deployment(8, True, True, True, 0, 48, spec)
    return PerfModel(RTX_PRO_6000_PCIE, KIMI_K25, dep)


def test_sampled_acceptance_falls_with_temperature():
    factors = [sampled_acceptance(t) for t in (0.0, 0.5, 1.0, 2.0)]
    assert factors[0] == 1.0
    assert factors == sorted(factors, reverse=True) and factors[-1] < factors[0]


def test_a_sampled_request_accepts_fewer_drafts_than_a_greedy_one():
    engine = Engine(
        speculative_model(),
        InstantClock(),
        max_running_requests=8,
        kv_tokens=100_000,
        decode_log_interval=40,
        seed=0,
    )
    greedy = engine.new_request("same prompt", 64, ignore_eos=False, thinking=True, greedy=True)
    sampled = engine.new_request("same prompt", 64, ignore_eos=False, thinking=True, temperature=1)
    assert sampled.prompt_factor == pytest.approx(greedy.prompt_factor * sampled_acceptance(1.0))
    model = engine.model
    tau_greedy = model.expected_accept_len(0, greedy.prompt_factor)
    tau_sampled = model.expected_accept_len(0, sampled.prompt_factor)
    assert 0.8 * tau_greedy < tau_sampled < tau_greedy  # lower, by the paper's 4-21%


@pytest.mark.parametrize(
    ("body", "temperature"), [({}, 1.0), ({"temperature": 0}, 0.0), ({"temperature": 0.6}, 0.6)]
)
def test_both_apis_read_the_temperature_with_sglangs_default_of_one(body, temperature):
    assert chat._temperature(body) == temperature
    assert generate._temperature(body) == temperature
