"""Memory as a first-class result, end to end on the simulator (issue 17): a datagen-style trial
(one shared prefix, more requests in flight than the pool admits) records its KV pool, what fits,
the cache hits, token usage and the queue from the server's own log lines and /metrics; a higher
mem_fraction_static gives a larger pool and, on this KV-bound load, more throughput."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from harness.trial import run_trial
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR

C = 48  # 48 x ~2k reserved tokens: more than the 0.80 pool (~52k tokens) admits


def datagen_trial(tmp_path, port: int, mem: float, hicache: int = 0):
    overrides = [
        "experiment=datagen",
        f"server.port={port}",
        f"server.mem_fraction_static={mem}",
        f"server.hicache_size={hicache}",
        f"benchmark.concurrency=[{C}]",
        "benchmark.max_tokens=2048",
        "benchmark.window_completions=16",
        "benchmark.runs=1",
        "benchmark.warmup=0",
        f"tracking.dir={tmp_path}",
    ]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        spec = build_trial_spec(compose(config_name="config", overrides=overrides))
    return run_trial(spec, tmp_path / f"mem-{mem}-{hicache}")


def test_a_datagen_trial_records_memory_and_a_larger_pool_serves_more(tmp_path, port):
    small = datagen_trial(tmp_path, port, 0.80)
    large = datagen_trial(tmp_path, port, 0.84, hicache=48)
    for result in (small, large):
        assert result.outcome == "ok", result.error
        (run,) = result.runs
        assert run.memory_source == "log"  # the window's own decode and prefill lines
        m = result.metrics
        assert m["kv_pool_tokens"] == result.effective["max_total_num_tokens"]
        assert m["requests_fit"] == m["kv_pool_tokens"] // m["request_tokens_mean"]
        assert m["request_tokens_mean"] > 2048  # the ~1.2k-token prefix + 2048 output tokens
        assert m["cache_hit_rate"] > 0.5  # the shared system prompt, cached after the first
        for key in ("token_usage_mean", "running_mean", "queue_mean", "retractions", "kv_bound"):
            assert key in m and f"{key}_c{C}" in m
    assert small.metrics["host_cache_tokens"] == 0  # no HiCache
    assert large.metrics["host_cache_tokens"] > large.metrics["kv_pool_tokens"]  # 48 GB/rank
    # The small pool held requests back: a queue, fewer running than in flight, KV-bound.
    assert small.metrics["queue_mean"] >= 1 and small.metrics["running_mean"] < C - 1
    assert small.metrics["kv_bound"] == 1
    # ignore_eos: every answer 2048 tokens, so the slots ran in waves, and the trial says so.
    assert "equal_lengths" in small.warnings and small.metrics[f"equal_length_c{C}"] == 2048
    assert large.metrics["kv_pool_tokens"] > small.metrics["kv_pool_tokens"]
    assert large.metrics["running_mean"] > small.metrics["running_mean"]
    assert large.metrics[f"output_tok_s_c{C}"] > small.metrics[f"output_tok_s_c{C}"]
