"""Multi-round users on the simulator (issue 17, harness/measure/rounds.py): each user's next round
sends its history, the answer it streamed and a follow-up, so later rounds can hit the radix cache;
with more users than the tight pool holds (64 users, 16 in flight), their idle histories are
evicted from the GPU, and HiCache's host tier (--enable-hierarchical-cache --hicache-size 48)
keeps them: a higher cache hit rate, the hits served from the host tier.

TTFT is not asserted here: it does not measure the cache at this size. With equal 512-token
answers (the preset before) the 16 slots finished in cohorts, and a returning user's TTFT was its
cohort's prefill (~2 s) or its own (~0.3 s), which a millisecond of timing decides: one CI run
read 1.75 s with HiCache against 0.32 s without it, at hit rates of 78% and 69%. With answers of
their own length the cohorts are gone, but a returning user's TTFT is ~0.1 simulated s, ~2 ms of
wall time at the default clock, and the machine's jitter decides (one run in four read 0.26 s with
HiCache against 0.10 s without). That an evicted prefix loads from the host faster than it is
recomputed is checked on an instant clock in tests/sim/test_kv_pool.py
(test_hicache_reloads_an_evicted_prefix_faster_than_recomputing_it); the preset's TTFT p99 is
compared run for run by its sweep (docs/memory.md, "The capacity presets")."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir

from harness.trial import run_trial
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR

C, USERS, ROUNDS = 16, 64, 3


def chat_trial(tmp_path, port: int, hicache: int, rounds: int = ROUNDS):
    overrides = [
        "experiment=multi_turn_chat",
        f"server.port={port}",
        "server.mem_fraction_static=0.80",  # ~52k tokens: below the 64 users' histories
        f"server.hicache_size={hicache}",
        f"benchmark.concurrency=[{C}]",
        f"search.throughput_concurrency={C}",
        f"benchmark.users={USERS}",
        f"benchmark.rounds={rounds}",
        f"benchmark.window_completions={USERS * ROUNDS - C}",
        "benchmark.runs=1",
        "benchmark.warmup=0",
        f"tracking.dir={tmp_path}",
    ]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        spec = build_trial_spec(compose(config_name="config", overrides=overrides))
    folder = tmp_path / f"hicache-{hicache}-rounds-{rounds}"
    result = run_trial(spec, folder)
    records = [json.loads(line) for line in (folder / "requests.jsonl").open()]
    return result, records


def test_later_rounds_hit_the_cache_and_hicache_keeps_the_evicted_histories(tmp_path, port):
    plain, records = chat_trial(tmp_path, port, 0)
    tiered, tiered_records = chat_trial(tmp_path, port, 48)
    for result in (plain, tiered):
        assert result.outcome == "ok", result.error
    measured = [r for r in records if r["phase"] == "measure" and r["error"] is None]
    by_round = {k: [r for r in measured if r["round"] == k] for k in (1, 2, 3)}
    assert all(by_round.values())  # every round was sent
    # round k + 1 carries round k's prompt, its answer and a follow-up: longer each round
    mean = {k: sum(r["prompt_tokens"] for r in v) / len(v) for k, v in by_round.items()}
    assert mean[1] < mean[2] < mean[3]
    assert mean[2] > mean[1] + 150  # the streamed answer (150-600 tokens) is in the history
    hits = (tiered.metrics["cache_hit_rate"], plain.metrics["cache_hit_rate"])
    assert hits[0] > hits[1] + 0.04, hits  # the host tier served the evicted histories
    assert tiered.metrics["host_cache_tokens"] > 0 == plain.metrics["host_cache_tokens"]
    # every round of the tiered run was sent as well, its returning users' histories included
    tiered_rounds = {r["round"] for r in tiered_records if r["phase"] == "measure"}
    assert tiered_rounds == {1, 2, 3}
