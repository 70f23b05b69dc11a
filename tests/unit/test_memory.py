"""Memory as a result: SGLang's own lines, as its source prints them, parsed and summarised per run
window (harness.measure.memory_probe); the trial's memory metrics and the KV-bound rule
(harness.measure.memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.measure.memory import admission_room, kv_bound, memory_metrics, pool_tokens
from harness.measure.memory_probe import MemoryProbe, hit_rate_of_finished, window_memory
from harness.record.results import RequestRecord, RunSummary
from harness.server.logs import (
    host_pool_tokens,
    parse_pool_sizes,
    parse_prefill_line,
    parse_retract_line,
)

# 0.5.23 managers/scheduler_components/metrics_reporter.py::report_prefill_stats (plain pool).
PREFILL_0523 = (
    "[2026-01-01 12:00:00 TP0] Prefill batch, #new-seq: 3, #new-token: 1536, "
    "#cached-token: 3584, token usage: 0.41, #running-req: 35, #queue-req: 115, "
    "#pending-token: 0, cuda graph: False, input throughput (token/s): 4200.00"
)
# The same with SGLANG_LOG_FORWARD_ITERS=1 and a hybrid SWA pool's usage parts.
PREFILL_0523_HYBRID = (
    "[2026-01-01 12:00:00 TP0] Prefill batch [812], #new-seq: 1, #new-token: 100, "
    "#cached-token: 0, full token usage: 0.50, swa token usage: 0.70, #running-req: 2, "
    "#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 10.00"
)
# 0.5.1.post3 managers/scheduler_metrics_mixin.py::log_prefill_stats.
PREFILL_051 = (
    "[2025-08-01 12:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 512, "
    "#cached-token: 1200, token usage: 0.94, #running-req: 35, #queue-req: 115, "
)
# 0.5.23 managers/scheduler.py (update_running_batch), with and without a mamba pool.
RETRACT_0523 = (
    "[2026-01-01 12:00:01 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
    "#new_tokens_gained: 8192, #new_token_ratio: 0.4000 -> 0.5000"
)
RETRACT_0523_MAMBA = (
    "KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 10, "
    "#mamba_num_gained: 1, #new_token_ratio: 0.4000 -> 0.5000"
)
RETRACT_051 = (
    "[2025-08-01 12:00:01 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 4, "
    "#new_token_ratio: 0.3000 -> 0.4200"
)
TEST_RETRACT = "Testing retraction. #retracted_reqs: 1, #new_tokens_gained: 5"
DECODE_0523 = (
    "[2026-01-01 12:00:02 TP0] Decode batch, #running-req: 35, #token: 150000, "
    "token usage: 0.94, cuda graph: True, gen throughput (token/s): 600.00, #queue-req: 115"
)
# Start-up: managers/scheduler.py (both), mem_cache/pool_host/base.py (0.5.23),
# mem_cache/memory_pool_host.py and mem_cache/memory_pool.py (0.5.1.post3).
MAX_TOTAL = (
    "[2026-01-01 11:59:00 TP0] max_total_num_tokens=159277, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=48, context_len=262144, "
    "available_gpu_mem=3.21 GB"
)
HOST_POOL_0523 = (
    "[2026-01-01 11:59:00 TP0] Allocating kv hierarchical KV host pool: 2515968 tokens, "
    "48.00 GB host memory."
)
HOST_POOL_0523_MTP = (
    "Allocating kv hierarchical KV host pool: 100032 tokens, 1.00 GB host memory, packed MTP KV "
    "layers: target_layers=61, draft_layers=1, total_layers=62."
)
HOST_POOL_0523_SWA = "Allocating swa hierarchical KV host pool: 777 tokens, 0.01 GB host memory."
HOST_POOL_051 = (
    "[2025-08-01 11:59:00 TP0] Allocating 48.00 GB host memory for hierarchical KV cache."
)
KV_ALLOCATED_051 = "KV Cache is allocated. #tokens: 116171, K size: 2.00 GB, V size: 2.00 GB"
KV_ALLOCATED_0523 = (
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 116171, KV size: 4.00 GB"
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (PREFILL_0523, (3, 1536, 3584, 0.41, 35, 115)),
        (PREFILL_0523_HYBRID, (1, 100, 0, 0.70, 2, 0)),
        (PREFILL_051, (1, 512, 1200, 0.94, 35, 115)),
    ],
)
def test_prefill_lines_of_both_surfaces(line, expected):
    stats = parse_prefill_line(line)
    assert stats is not None
    got = (stats.new_seq, stats.new_tokens, stats.cached_tokens, stats.token_usage)
    assert (*got, stats.running_req, stats.queue_req) == expected


def test_a_decode_line_is_not_a_prefill_line():
    assert parse_prefill_line(DECODE_0523) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [(RETRACT_0523, 2), (RETRACT_0523_MAMBA, 1), (RETRACT_051, 4), (TEST_RETRACT, None)],
)
def test_retraction_lines(line, expected):
    assert parse_retract_line(line) == expected


def test_pool_sizes_0523_prints_the_host_pool_in_tokens():
    text = "\n".join([HOST_POOL_0523_SWA, KV_ALLOCATED_0523, MAX_TOTAL, HOST_POOL_0523])
    sizes = parse_pool_sizes(text)
    assert sizes.max_total_num_tokens == 159277
    assert (sizes.host_tokens, sizes.host_gb) == (2515968, 48.0)  # the kv pool, not the swa one
    assert host_pool_tokens(sizes) == 2515968


def test_pool_sizes_0523_with_draft_layers():
    assert parse_pool_sizes(HOST_POOL_0523_MTP).host_tokens == 100032


def test_pool_sizes_051_derive_host_tokens_from_the_device_pools_bytes_per_token():
    sizes = parse_pool_sizes("\n".join([KV_ALLOCATED_051, HOST_POOL_051]))
    assert sizes.host_tokens is None and sizes.host_gb == 48.0
    assert (sizes.device_tokens, sizes.device_gb) == (116171, 4.0)
    assert host_pool_tokens(sizes) == int(48 * 116171 / 4)


def test_pool_tokens_prefers_server_info_then_log_then_metrics():
    assert pool_tokens({"max_total_num_tokens": 1000, "hicache_size": 0}, MAX_TOTAL, {}) == (
        1000,
        0,
    )
    assert pool_tokens({}, MAX_TOTAL + "\n" + HOST_POOL_0523, {}) == (159277, 2515968)
    counters = {"sglang:max_total_num_tokens": 77.0, "sglang:hicache_host_total_tokens": 99.0}
    assert pool_tokens({}, "", counters) == (77, 99)
    assert pool_tokens({"hicache_size": 48}, "", {}) == (None, None)  # on, but not printed


def test_window_memory_sums_hits_over_prefills_and_averages_decode_lines():
    low = DECODE_0523.replace("token usage: 0.94", "token usage: 0.90").replace(
        "#queue-req: 115", "#queue-req: 105"
    )
    memory = window_memory(
        [PREFILL_0523, DECODE_0523, RETRACT_0523, low, PREFILL_051, "unrelated line"]
    )
    assert (memory.decode_lines, memory.prefill_lines, memory.retractions) == (2, 2, 2)
    assert memory.token_usage_mean == pytest.approx(0.92)
    assert memory.token_usage_max == 0.94
    assert memory.queue_mean == 110 and memory.running_mean == 35
    # (3584 + 1200) / (1536 + 3584 + 512 + 1200): token-weighted, not a mean of line ratios
    assert memory.cache_hit_rate == pytest.approx(4784 / 6832)


def test_window_memory_without_prefills_has_no_hit_rate():
    assert window_memory([DECODE_0523]).cache_hit_rate is None


@pytest.mark.parametrize(
    ("usage", "queue", "retractions", "running", "cap", "bound"),
    [
        (0.94, 115, 0, 35, 2048, True),  # the seeds' pipeline: full pool, a long queue
        (0.94, 115, 0, None, None, True),  # the same without the cap known
        (0.94, 0, 0, 35, 2048, False),  # full, but nobody waits: the pool fits the load
        (0.40, 30, 0, 48, 48, False),  # a queue at the request cap, room in the pool: the cap
        (0.40, 30, 0, None, None, False),  # ... and without the cap known: not shown to be KV
        # The pool's admission held them back: its reservation for the running requests' decode
        # tokens (all of max_new_tokens with ignore_eos) fills it long before usage does.
        (0.55, 60, 0, 86, 2048, True),
        (0.50, 0, 3, 20, 48, True),  # decode ran out of KV
        (None, None, None, None, None, False),
    ],
)
def test_kv_bound_rule(usage, queue, retractions, running, cap, bound):
    assert kv_bound(usage, queue, retractions, running, cap) is bound


def test_a_queue_below_the_cap_in_a_roomy_pool_is_not_kv_bound():
    # The H200 baseline at 64 in flight (capped at 48): 805,439 tokens hold 1,440 requests of
    # 559, yet decode lines read 44 running and 14 queued while bursts of arrivals took their
    # prefill turns. Its admission reservation (prompt + min(max_new_tokens, 4096) each) can
    # never refuse a request below the cap, so memory did not hold them back.
    assert admission_room(805_439, 48, 559.0, 512)
    assert not kv_bound(0.09, 13.9, 0, 43.7, 48, room=True)
    assert kv_bound(0.09, 13.9, 0, 43.7, 48, room=False)  # unknown room: the rule as before
    # The seeds' pipeline: 116,171 tokens cannot reserve 48 x (6,600 + 4,096).
    assert not admission_room(116_171, 48, 6600.0, 10240)
    assert not admission_room(805_439, None, 559.0, 512)  # the cap unknown: not ruled out
    assert kv_bound(0.55, 60, 0, 20, 48, room=True) is False
    assert kv_bound(0.94, 60, 0, 20, 48, room=True)  # a full pool is full whatever the room
    assert kv_bound(0.09, 0, 2, 20, 48, room=True)  # and a retraction is decode out of KV


def test_memory_metrics_rules_memory_out_when_the_pool_holds_the_cap():
    runs = [
        _run(
            64,
            token_usage_mean=0.09,
            running_mean=43.7,
            queue_mean=13.9,
            retractions=0,
            request_tokens_mean=559.0,
        ),
    ]
    assert memory_metrics(runs, pool=805_439, host=0, cap=48, max_new_tokens=512)["kv_bound"] == 0
    assert memory_metrics(runs, pool=805_439, host=0, cap=48)["kv_bound"] == 1  # max unknown
    assert memory_metrics(runs, pool=20_000, host=0, cap=48, max_new_tokens=512)["kv_bound"] == 1


def _run(concurrency: int, **memory) -> RunSummary:
    fields = dict(
        token_usage_mean=0.9,
        queue_mean=20.0,
        running_mean=35.0,
        cache_hit_rate=0.5,
        memory_source="log",
        retractions=0,
        request_tokens_mean=4000.0,
    )
    fields.update(memory)
    return RunSummary(
        run=1,
        concurrency=concurrency,
        requests=10,
        errors=0,
        output_tokens=1000,
        decode_tok_s=None,
        e2e_tok_s=None,
        output_tok_s=None,
        ttft_s=None,
        accept_len=None,
        accept_len_source=None,
        **fields,
    )


def test_memory_metrics_per_level_and_at_the_highest_level():
    runs = [
        _run(8, token_usage_mean=0.3, queue_mean=0.0),
        _run(150, token_usage_mean=0.92),
        _run(150, token_usage_mean=0.96, retractions=1),
        _run(150, token_usage_mean=0.10, incomplete=True),  # left out
    ]
    metrics = memory_metrics(runs, pool=116171, host=0, cap=48)
    assert metrics["kv_pool_tokens"] == 116171 and metrics["host_cache_tokens"] == 0
    assert metrics["token_usage_mean_c150"] == pytest.approx(0.94)
    assert metrics["token_usage_mean"] == pytest.approx(0.94)  # the highest level
    assert metrics["retractions"] == 1 and metrics["kv_bound"] == 1.0
    assert metrics["kv_bound_c8"] == 0.0 and metrics["token_usage_mean_c8"] == 0.3
    assert metrics["requests_fit"] == 29  # floor(116171 / 4000)
    assert metrics["cache_hit_rate"] == 0.5 and metrics["queue_mean"] == 20


def test_memory_metrics_without_any_memory_record():
    runs = [
        _run(
            1,
            memory_source=None,
            token_usage_mean=None,
            queue_mean=None,
            running_mean=None,
            cache_hit_rate=None,
            request_tokens_mean=None,
        )
    ]
    assert memory_metrics(runs, pool=None, host=None) == {}


def _record(end_s: float, prompt: int = 1000, completion: int = 3000) -> RequestRecord:
    return RequestRecord(
        phase="measure",
        run=1,
        concurrency=2,
        prompt_id="p",
        start_s=0.0,
        first_token_s=0.1,
        end_s=end_s,
        prompt_tokens=prompt,
        completion_tokens=completion,
    )


def test_probe_reads_only_the_lines_printed_inside_the_steady_window(tmp_path: Path):
    """Lines before the window's first completion (the ramp-up) and after its last one are not
    the window's: the probe maps the window to log offsets noted at each completion."""
    log = tmp_path / "server.log"
    log.write_text("startup\n")
    probe = MemoryProbe(log, "http://127.0.0.1:9", {})  # nothing listens: no /metrics
    probe.start_run()

    def printed(line: str) -> None:
        with log.open("a") as fh:
            fh.write(line + "\n")

    printed(DECODE_0523.replace("token usage: 0.94", "token usage: 0.10"))  # ramp-up
    probe.on_request(_record(1.0, completion=1))  # the C-th completion: the window opens
    printed(PREFILL_0523)
    printed(DECODE_0523)
    probe.on_request(_record(2.0))
    printed(RETRACT_0523)
    probe.on_request(_record(3.0))  # the window closes
    printed(DECODE_0523.replace("token usage: 0.94", "token usage: 0.20"))  # cut requests' tail
    summary = _run(
        2,
        token_usage_mean=None,
        queue_mean=None,
        running_mean=None,
        cache_hit_rate=None,
        memory_source=None,
        request_tokens_mean=None,
    )
    summary.window = [1.0, 3.0]
    probe.end_run(summary)
    assert summary.memory_source == "log"
    assert summary.token_usage_mean == 0.94 and summary.queue_mean == 115
    assert summary.retractions == 2
    assert summary.cache_hit_rate == pytest.approx(3584 / 5120)
    assert summary.request_tokens_mean == 4000  # the completions inside (1.0, 3.0]


def test_probe_falls_back_to_counter_deltas_without_lines(tmp_path: Path, monkeypatch):
    log = tmp_path / "server.log"
    log.write_text("")
    reads = iter(
        [
            {
                "sglang:num_retracted_requests_total": 2.0,
                "sglang:cached_tokens_total": 100.0,
                "sglang:prompt_tokens_total": 400.0,
            },
            {
                "sglang:num_retracted_requests_total": 5.0,
                "sglang:cached_tokens_total": 700.0,
                "sglang:prompt_tokens_total": 1400.0,
            },
        ]
    )
    probe = MemoryProbe(log, "http://127.0.0.1:9", {})
    monkeypatch.setattr(probe, "read_counters", lambda: next(reads))
    probe.start_run()
    summary = probe.end_run(_run(1, memory_source=None, cache_hit_rate=None, retractions=None))
    assert summary.memory_source == "metrics"
    assert (summary.retractions, summary.cache_hit_rate) == (3, pytest.approx(0.6))


def test_counter_hit_rate_covers_only_requests_finished_between_the_reads():
    """The cached and prompt counters move per finished request: a run whose requests all
    still ran at the close read (no prompt counter moved) has no hit rate from them, though
    the scheduler's retraction counter moved meanwhile."""
    before = {"sglang:cached_tokens_total": 100.0, "sglang:prompt_tokens_total": 400.0}
    running = {**before, "sglang:num_retracted_requests_total": 1.0}
    assert hit_rate_of_finished(before, running) is None
    done = {"sglang:cached_tokens_total": 400.0, "sglang:prompt_tokens_total": 1000.0}
    assert hit_rate_of_finished(before, done) == pytest.approx(0.5)


def test_probe_window_holds_late_reported_completions(tmp_path: Path):
    """The client hears of completions in wall order; their server-clock ends need not be in
    that order: the window's lines run to the last completion inside it, whenever it was heard."""
    log = tmp_path / "server.log"
    log.write_text("")
    probe = MemoryProbe(log, "http://127.0.0.1:9", {})
    probe.start_run()
    probe.on_request(_record(1.0))  # opens the window
    with log.open("a") as fh:
        fh.write(DECODE_0523 + "\n")
    probe.on_request(_record(3.0))  # closes it, heard before the one that ended at 2.0
    with log.open("a") as fh:
        fh.write(RETRACT_0523 + "\n")
    probe.on_request(_record(2.0))
    summary = _run(2, memory_source=None, retractions=None, request_tokens_mean=None)
    summary.window = [1.0, 3.0]
    probe.end_run(summary)
    assert (summary.memory_source, summary.retractions) == ("log", 2)


def test_a_window_of_decode_lines_only_takes_the_counters_hit_rate(tmp_path: Path, monkeypatch):
    # On a busy host the log offsets marked at completions can lag the server's lines, leaving a
    # window with decode lines and no prefill line: the hit rate then comes from the counters
    # (the run's finished requests), the rest from the lines.
    log = tmp_path / "server.log"
    log.write_text("")
    reads = iter(
        [
            {"sglang:cached_tokens_total": 100.0, "sglang:prompt_tokens_total": 400.0},
            {"sglang:cached_tokens_total": 700.0, "sglang:prompt_tokens_total": 1400.0},
        ]
    )
    probe = MemoryProbe(log, "http://127.0.0.1:9", {})
    monkeypatch.setattr(probe, "read_counters", lambda: next(reads))
    probe.start_run()
    with log.open("a") as fh:
        fh.write(DECODE_0523 + "\n")
    summary = probe.end_run(_run(1, memory_source=None, cache_hit_rate=None, retractions=None))
    assert summary.memory_source == "log" and summary.token_usage_mean == pytest.approx(0.94)
    assert summary.cache_hit_rate == pytest.approx(0.6)
