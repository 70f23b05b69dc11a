"""What the capacity model shows the harness: /metrics names, the stream interval, the oracle."""

from __future__ import annotations

import re

from harness.sim.api.prometheus import prometheus_text
from harness.sim.api.state import ServerState
from harness.sim.oracle import modelled_steady_state
from tests.sim._engine import KIMI, SEEDS_FRACTION, engine, run_all


def _metrics(e, version: str = "0.5.23") -> dict[str, float]:
    plan = e.model.memory_plan(0.88)
    simulator = {"sglang_version": version}
    state = ServerState(
        engine=e, args={"model_path": "m"}, launch_command=[], plan=plan, simulator=simulator
    )
    text = prometheus_text(state)
    return {
        m[0] + m[1]: float(m[2])
        for m in re.findall(r"^(sglang:\w+)(\{[^}]*\})? (\S+)$", text, re.M)
    }


def _names(metrics: dict[str, float]) -> set[str]:
    return {k.split("{")[0] for k in metrics}


def test_metrics_carry_sglang_0523s_capacity_names():
    e = engine("--enable-hierarchical-cache", "--hicache-size", "48", kv_tokens=30_000)
    system = "Shared few-shot examples for every request. " * 100
    reqs = [
        e.new_request(
            [{"role": "system", "content": system}, {"role": "user", "content": f"Q{i}"}],
            32,
            ignore_eos=True,
            thinking=False,
        )
        for i in range(3)
    ]
    run_all(e, reqs[:1])
    run_all(e, reqs[1:])
    m = _metrics(e)
    names = _names(m)
    for name in (
        "sglang:token_usage",
        "sglang:num_used_tokens",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:cache_hit_rate",
        "sglang:max_total_num_tokens",
        "sglang:num_retracted_reqs",
        "sglang:new_token_ratio",
        "sglang:hicache_host_used_tokens",
        "sglang:hicache_host_total_tokens",
        "sglang:cached_tokens_total",
    ):
        assert name in names, name
    # no retraction yet: real SGLang 0.5.23 exports no retraction counter before the first one
    assert "sglang:num_retracted_requests_total" not in names
    device = [
        v
        for k, v in m.items()
        if k.startswith("sglang:cached_tokens_total") and 'cache_source="device"' in k
    ]
    assert device and device[0] >= len(system) // 4
    assert (
        m[next(k for k in m if k.startswith("sglang:hicache_host_total_tokens"))] == 48e9 // 70_272
    )


def test_the_legacy_surface_has_its_own_retraction_gauge():
    e = engine("--sim-sglang-version", "0.5.1", kv_tokens=30_000)
    run_all(e, [e.new_request("hello", 8, ignore_eos=True, thinking=False)])
    names = _names(_metrics(e, "0.5.1"))
    assert "sglang:total_retracted_reqs" in names and "sglang:num_retracted_reqs" not in names
    assert "sglang:token_usage" in names and "sglang:cache_hit_rate" in names


def test_stream_interval_sends_the_first_token_then_chunks_of_n():
    e = engine("--stream-interval", "16")
    r = e.new_request("count to a hundred", 100, ignore_eos=True, thinking=False)
    sizes = []

    import asyncio

    async def drive() -> None:
        loop = asyncio.create_task(e.run())
        e.submit(r)
        while True:
            chunk = await r.queue.get()
            sizes.append(len(chunk.tokens))
            if chunk.finish_reason is not None:
                break
        loop.cancel()

    asyncio.run(drive())
    assert sizes[0] == 1 and sum(sizes) == 100
    assert all(s >= 16 for s in sizes[1:-1]) and len(sizes) <= 1 + 100 // 16 + 1


def test_the_oracle_takes_message_lists_and_reports_the_capacity_fields():
    system = "You generate training data. Follow these worked examples. " * 150
    prompts = [
        [{"role": "system", "content": system}, {"role": "user", "content": f"Task {i}: solve it."}]
        for i in range(200)
    ]
    flags = [*KIMI, *SEEDS_FRACTION, "--stream-interval", "16", "--sim-reasoning-tokens", "800:0.2"]
    r = modelled_steady_state(flags, 16, prompts, 2048, 16)
    assert r.requests >= 1 and r.output_tok_s > 0
    assert r.cache_hit_rate > 0.8  # the shared system prompt, computed once
    assert 0 < r.token_usage < 1 and 0 < r.running <= 16 and r.queued >= 0
    assert r.max_total_num_tokens > 100_000 and r.retractions == 0
