"""Multi-round users on the simulator (issue 17, harness/rounds.py): each user's next round sends
its history, the answer it streamed and a follow-up, so the second round's requests hit the radix
cache; with more users than the tight pool holds, their idle histories are evicted from the GPU,
and HiCache's host tier (--enable-hierarchical-cache --hicache-size 48) keeps them: a higher
cache hit rate and a lower TTFT than the same pool without it."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir

from harness.trial import run_trial
from sweep.app import CONF_DIR
from sweep.config import build_trial_spec

C, USERS, ROUNDS = 4, 32, 3


def chat_trial(tmp_path, port: int, hicache: int, rounds: int = ROUNDS):
    overrides = [
        "experiment=multi_turn_chat",
        f"server.port={port}",
        "server.mem_fraction_static=0.78",  # a pool far below the 32 users' histories
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
    single, _ = chat_trial(tmp_path, port, 0, rounds=1)
    plain, records = chat_trial(tmp_path, port, 0)
    tiered, _ = chat_trial(tmp_path, port, 48)
    for result in (single, plain, tiered):
        assert result.outcome == "ok", result.error
    measured = [r for r in records if r["phase"] == "measure" and r["error"] is None]
    by_round = {k: [r for r in measured if r["round"] == k] for k in (1, 2, 3)}
    assert all(by_round.values())  # every round was sent
    # round k + 1 carries round k's prompt, its answer and a follow-up: longer each round
    mean = {k: sum(r["prompt_tokens"] for r in v) / len(v) for k, v in by_round.items()}
    assert mean[1] < mean[2] < mean[3]
    assert mean[2] > mean[1] + 256  # the streamed answer (512 tokens) is in the history
    hits = {name: r.metrics["cache_hit_rate"] for name, r in
            (("single", single), ("plain", plain), ("tiered", tiered))}  # fmt: skip
    pool = plain.metrics["kv_pool_tokens"]
    assert hits["tiered"] > hits["plain"] + 0.05, (hits, pool)  # the host tier held them
    assert tiered.metrics["host_cache_tokens"] > 0 == plain.metrics["host_cache_tokens"]
    ttft = (tiered.metrics[f"ttft_ms_c{C}"], plain.metrics[f"ttft_ms_c{C}"])  # the means
    assert ttft[0] < ttft[1], (ttft, hits)  # the histories loaded, not recomputed
