"""benchmarks/client_fidelity.py compares like with like: above concurrency 1 the harness measures
a steady-state window (harness.measure.steady), so the model is the same window (oracle), not a
wave."""

from __future__ import annotations

from benchmarks.client_fidelity import MEM_FRACTION, SIM_FLAGS, modelled, spec_for
from harness.server.command import server_flags
from harness.spec import ServerSpec

ARGV = [
    *server_flags(
        ServerSpec(model_path="moonshotai/Kimi-K2.5", tp_size=8, mem_fraction_static=MEM_FRACTION)
    ),
    *SIM_FLAGS,
]
PROMPTS = [f"prompt number {i}: " + "words " * (i % 7) for i in range(64)]


def test_above_concurrency_one_the_model_is_the_steady_state_window():
    spec = spec_for(4, 16)
    assert spec.window_at(4) == 16 and spec.requests_at(4) == 2 * 4 + 16 - 1
    model = modelled(ARGV, spec, 4, PROMPTS)
    assert model.requests == 16  # the window's completions, as the measured run's


def test_at_concurrency_one_the_model_is_the_run_to_completion():
    spec = spec_for(1, 16)
    model = modelled(ARGV, spec, 1, PROMPTS)
    assert model.requests == 4
    # ignore_eos: every request makes max_tokens, the first from prefill, the rest decoded
    assert model.decode_tok_s > 0 and model.output_tok_s > 0
