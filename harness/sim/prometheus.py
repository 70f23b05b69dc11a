"""`/metrics`: the Prometheus text SGLang exports (reference/sglang.md §6), per surface.

0.5.23 `observability/metrics_collector.py`: the speculative gauges `spec_accept_length`,
`spec_accept_rate`, `spec_cap_length`, `spec_block_accept_length` (DSpark only: 0 here),
`spec_num_steps`, `spec_num_draft_tokens`, set at each decode log line
(`managers/scheduler_components/metrics_reporter.py`); the `*_total` counters only ever grow
(a flush resets the scheduler's own counters, never these).
"""

from __future__ import annotations

from harness.sim.state import ServerState


def prometheus_text(state: ServerState) -> str:
    """The metric names SGLang exports for the version spoken, with its label set."""
    engine, c, totals = state.engine, state.engine.counters, state.engine.totals
    labels = f'model_name="{state.served_model_name}",engine_type="unified",tp_rank="0"'
    if not state.legacy:
        labels += ',pp_rank="0"'
    gauges = {
        "sglang:num_running_reqs": len(engine.running),
        "sglang:num_queue_reqs": len(engine.waiting),
        "sglang:gen_throughput": c.last_gen_throughput,
    }
    if state.legacy:
        gauges["sglang:num_used_tokens"] = engine.kv_used()
        gauges["sglang:token_usage"] = engine.kv_used() / max(state.plan.kv_tokens, 1)
        gauges["sglang:cache_hit_rate"] = 0.0
    else:
        gauges["sglang:max_total_num_tokens"] = state.plan.kv_tokens
        gauges["sglang:is_cuda_graph"] = int(engine.model.dep.cuda_graph)
    if engine.speculative:
        spec = engine.model.spec
        assert spec is not None
        gauges["sglang:spec_accept_length"] = c.last_accept_len or 0.0
        if not state.legacy:
            gauges["sglang:spec_accept_rate"] = c.last_accept_rate or 0.0
            gauges["sglang:spec_cap_length"] = 0.0
            gauges["sglang:spec_block_accept_length"] = 0.0
            gauges["sglang:spec_num_steps"] = spec.steps
            gauges["sglang:spec_num_draft_tokens"] = spec.draft_tokens
    counters = {
        "sglang:prompt_tokens_total": totals.prompt_tokens,
        "sglang:generation_tokens_total": totals.generation_tokens,
        "sglang:num_requests_total": totals.requests,
    }
    if engine.speculative and not state.legacy:
        counters["sglang:spec_verify_calls_total"] = totals.verify_calls
    lines = []
    for name, value in gauges.items():
        lines += [f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
    for name, value in counters.items():
        lines += [f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
    return "\n".join(lines) + "\n"
