"""`/metrics`: the Prometheus text SGLang exports (reference/sglang.md §6), per surface.

0.5.23 `observability/metrics_collector.py`: the speculative gauges `spec_accept_length`,
`spec_accept_rate`, `spec_cap_length`, `spec_block_accept_length` (DSpark only: 0 here),
`spec_num_steps`, `spec_num_draft_tokens`, set at each decode log line
(`managers/scheduler_components/metrics_reporter.py`); the `*_total` counters only ever grow
(a flush resets the scheduler's own counters, never these). The token, request, verify and
cached counters are the tokenizer manager's and move once per finished request
(`TokenizerMetricsCollector.observe_one_finished_request`; harness/sim/request.py `Totals`).

The capacity gauges (0.5.23 `observability/metrics_collector.py`, set from the scheduler's stats
at each prefill/decode stats line: `metrics_reporter.py`, `pool_stats_observer.py`):
`token_usage`, `num_used_tokens`, `cache_hit_rate` (the last prefill batch's hits over its input),
`num_retracted_reqs` (retracted since the previous stats line), `new_token_ratio`,
`max_total_num_tokens`, and with HiCache `hicache_host_used_tokens` / `hicache_host_total_tokens`;
the counters `num_retracted_requests_total`, `num_retracted_input_tokens_total`,
`num_retracted_output_tokens_total` and `cached_tokens_total{cache_source="device"|"host"}`.
0.5.1.post3 (`metrics/collector.py`) has `token_usage`, `num_used_tokens`, `cache_hit_rate`,
`total_retracted_reqs` (a gauge of all retractions) and an unlabelled `cached_tokens_total`.
"""

from __future__ import annotations

from harness.sim.api.state import ServerState


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
    gauges["sglang:num_used_tokens"] = engine.kv_used()
    gauges["sglang:token_usage"] = engine.pool.usage
    gauges["sglang:cache_hit_rate"] = c.cache_hit_rate
    host = engine.pool.host
    if state.legacy:
        gauges["sglang:total_retracted_reqs"] = totals.retracted_requests
    else:
        gauges["sglang:num_retracted_reqs"] = c.retracted_gauge
        gauges["sglang:new_token_ratio"] = engine.ratio.current
        gauges["sglang:max_total_num_tokens"] = state.plan.kv_tokens
        gauges["sglang:is_cuda_graph"] = int(engine.model.dep.cuda_graph)
        if host is not None:
            gauges["sglang:hicache_host_used_tokens"] = host.used
            gauges["sglang:hicache_host_total_tokens"] = host.capacity
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
    lines = []
    for name, value in gauges.items():
        lines += [f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
    scheduler = {}
    # 0.5.23 exports no retraction counter before the first retraction (real SGLang 0.5.23 on a
    # CPU: absent from /metrics at start-up and after requests without one).
    if not state.legacy and totals.retracted_requests:
        scheduler["sglang:num_retracted_requests_total"] = totals.retracted_requests
        scheduler["sglang:num_retracted_input_tokens_total"] = totals.retracted_input_tokens
        scheduler["sglang:num_retracted_output_tokens_total"] = totals.retracted_output_tokens
    for name, value in scheduler.items():
        lines += [f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
    lines += _finished_counters(state) + _startup_lines(state, labels)
    return "\n".join(lines) + "\n"


def _finished_counters(state: ServerState) -> list[str]:
    """The tokenizer manager's counters, moved once per finished request (request.py `Totals`).
    0.5.23 labels them as `tokenizer_metric_labels()` does (model_name, engine_type: no rank, the
    tokenizer is one process) and the token and request counters also by `is_streaming`; a
    series appears once a request of its kind finished (prometheus_client exports a labelled
    child from its first `.labels()`)."""
    totals = state.engine.totals
    if state.legacy:  # 0.5.1.post3 as this simulator spoke it before: unsplit, one series each
        labels = f'model_name="{state.served_model_name}",engine_type="unified",tp_rank="0"'
        counters = {
            "sglang:prompt_tokens_total": totals.prompt_tokens,
            "sglang:generation_tokens_total": totals.generation_tokens,
            "sglang:num_requests_total": totals.requests,
        }
        lines = []
        for name, value in counters.items():
            lines += [f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value)}"]
        cached = totals.cached_device_tokens + totals.cached_host_tokens
        lines += [
            "# TYPE sglang:cached_tokens_total counter",
            f"sglang:cached_tokens_total{{{labels}}} {float(cached)}",
        ]
        return lines
    labels = f'engine_type="unified",model_name="{state.served_model_name}"'
    lines = []
    for name, attr in (
        ("sglang:prompt_tokens_total", "prompt_tokens"),
        ("sglang:generation_tokens_total", "generation_tokens"),
        ("sglang:num_requests_total", "requests"),
    ):
        lines.append(f"# TYPE {name} counter")
        lines += [
            f'{name}{{{labels},is_streaming="{key}"}} {float(getattr(series, attr))}'
            for key, series in sorted(totals.finished.items())
        ]
    if state.engine.speculative:
        lines.append("# TYPE sglang:spec_verify_calls_total counter")
        if totals.verify_calls > 0:  # `.inc` only when spec_verify_ct > 0
            lines.append(f"sglang:spec_verify_calls_total{{{labels}}} {float(totals.verify_calls)}")
    lines.append("# TYPE sglang:cached_tokens_total counter")
    cached = {"device": totals.cached_device_tokens, "host": totals.cached_host_tokens}
    # by source; a source with no hits has no sample yet (report_cache_source: value > 0)
    lines += [
        f'sglang:cached_tokens_total{{{labels},cache_source="{k}"}} {float(v)}'
        for k, v in cached.items()
        if v > 0
    ]
    return lines


def _startup_lines(state: ServerState, labels: str) -> list[str]:
    """0.5.23 `metrics_collector.py::emit_startup_time`: `sglang:startup_time_seconds` by phase
    (load_weight, kv_cache_allocation, scheduler_e2e, tokenizer_e2e) and
    `sglang:startup_cuda_graph_time_seconds` by capture phase (every phase, 0 for those not
    captured). 0.5.1 has neither."""
    startup = state.startup_time
    if startup is None:
        return []
    lines = ["# TYPE sglang:startup_time_seconds gauge"]
    for phase in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"):
        value = float(startup[phase])
        lines.append(f'sglang:startup_time_seconds{{{labels},phase="{phase}"}} {value}')
    lines.append("# TYPE sglang:startup_cuda_graph_time_seconds gauge")
    for phase, value in startup["cuda_graph"].items():
        line = f'sglang:startup_cuda_graph_time_seconds{{{labels},phase="{phase}"}} {float(value)}'
        lines.append(line)
    return lines
