"""The simulated KV pool against SGLang 0.5.23's scheduling rules (docs/simulator-model.md,
Capacity)."""

from __future__ import annotations

import logging

import pytest

from harness.server.logs import parse_decode_line
from harness.sim.capacity.policy import CLIP_MAX_NEW_TOKENS, NewTokenRatio, select_prefill
from harness.sim.oracle import modelled_load
from tests.sim._engine import KIMI, engine, run_all

PROMPT = "Solve the following problem carefully. " * 10  # ~112 tokens


def _requests(e, n: int, max_new: int, prompt: str = PROMPT, ignore_eos: bool = False):
    return [
        e.new_request(f"{prompt} #{i}", max_new, ignore_eos=ignore_eos, thinking=True)
        for i in range(n)
    ]


def test_admission_stops_where_the_pool_cannot_hold_the_reservation():
    """PrefillAdder: a request goes in while uncached input + min(max_new, 4096) < available +
    evictable - the running requests' reservations; one admitted in the same batch reserves its
    clipped max_new_tokens whole."""
    e = engine(kv_tokens=12_000)
    waiting = _requests(e, 5, 8000)
    prompt = waiting[0].prompt_tokens
    admitted = select_prefill(
        e.pool, waiting, [], e.ratio.current, max_running=48, max_prefill_tokens=16384, now=0.0
    )
    # 2 x (prompt + 4096) fit in 12,000; a third would need prompt + 4096 more.
    assert len(admitted) == 2 and len(waiting) == 3
    assert 12_000 - 2 * (prompt + CLIP_MAX_NEW_TOKENS) < prompt + CLIP_MAX_NEW_TOKENS
    # Once running, each reserves only ratio x its remaining tokens: a third one fits.
    running = [a.request for a in admitted]
    more = select_prefill(
        e.pool, waiting, running, e.ratio.current, max_running=48, max_prefill_tokens=16384, now=0
    )
    assert len(more) == 1 and len(waiting) == 2
    budget = 12_000 - 2 * prompt - 0.7 * 2 * CLIP_MAX_NEW_TOKENS
    assert prompt + CLIP_MAX_NEW_TOKENS < budget < 2 * (prompt + CLIP_MAX_NEW_TOKENS)


def test_ignore_eos_reserves_its_whole_remainder_and_the_rest_queues():
    e = engine(kv_tokens=20_000)
    waiting = _requests(e, 8, 4000, ignore_eos=True)
    admitted = select_prefill(
        e.pool, waiting, [], e.ratio.current, max_running=48, max_prefill_tokens=16384, now=0.0
    )
    running = [a.request for a in admitted]
    again = select_prefill(
        e.pool, waiting, running, e.ratio.current, max_running=48, max_prefill_tokens=16384, now=0
    )
    assert len(admitted) == 4 and not again  # ratio 1 for ignore_eos: nothing new fits
    assert len(waiting) == 4


def test_decode_out_of_kv_retracts_logs_and_redoes_the_prefill(caplog):
    """Long outputs overcommit the pool (the ratio's reservation is an estimate): SGLang retracts
    the request with the fewest decoded tokens, warns, raises new_token_ratio, and prefills it
    again later with its decoded tokens as input; every request still finishes whole."""
    e = engine("--sim-reasoning-tokens", "3000:0.1", kv_tokens=24_000, log_interval=20)
    requests = _requests(e, 12, 8000)
    with caplog.at_level(logging.INFO, logger="sglang.scheduler"):
        run_all(e, requests)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    retract = [m for m in warnings if m.startswith("KV cache pool is full. Retract requests.")]
    assert retract, warnings
    assert "#retracted_reqs: 1, #new_tokens_gained: " in retract[0]
    old, new = retract[0].rsplit("#new_token_ratio: ", 1)[1].split(" -> ")
    assert float(new) > float(old) or float(old) == e.ratio.init
    assert e.totals.retracted_requests == len(retract) >= 1
    assert all(r.generated == r.limit for r in requests)
    retracted = [r for r in requests if r.retractions]
    # Their decoded tokens were computed again as prompt: more input than the prompts hold.
    recomputed = e.totals.computed_prompt_tokens + e.totals.prefill_hit_tokens
    assert recomputed > sum(r.prompt_tokens for r in requests)
    assert retracted and e.totals.retracted_output_tokens > 0
    assert e.pool.used == 0 and e.pool.private == 0  # everything given back


def test_a_shared_prefix_hits_the_radix_cache():
    system = "You are a careful assistant. Follow the few-shot examples exactly. " * 60
    e = engine()
    first = e.new_request(
        [{"role": "system", "content": system}, {"role": "user", "content": "Question one?"}],
        16,
        ignore_eos=True,
        thinking=False,
    )
    run_all(e, [first])
    second = e.new_request(
        [{"role": "system", "content": system}, {"role": "user", "content": "Another one?"}],
        16,
        ignore_eos=True,
        thinking=False,
    )
    run_all(e, [second])
    assert e.totals.cached_device_tokens >= len(system) // 4  # the system prompt, cached
    assert e.counters.cache_hit_rate > 0.9


def test_multi_turn_history_hits_the_cache():
    e = engine()
    turn1 = [{"role": "user", "content": "Tell me about the history of Rome. " * 20}]
    r1 = e.new_request(turn1, 16, ignore_eos=True, thinking=False)
    run_all(e, [r1])
    turn2 = [
        *turn1,
        {"role": "assistant", "content": "Rome was..."},
        {"role": "user", "content": "More?"},
    ]
    r2 = e.new_request(turn2, 16, ignore_eos=True, thinking=False)
    run_all(e, [r2])
    assert e.totals.cached_device_tokens >= r1.prompt_tokens - 2


def test_hicache_reloads_an_evicted_prefix_faster_than_recomputing_it():
    """Without HiCache an evicted prefix is prefilled again; with it the host copy comes back over
    PCIe (~50 GB/s) in a fraction of the time."""
    few_shot = "Example: a long worked solution with many steps and checks. " * 400  # ~6k tokens

    def ttft(*flags: str) -> tuple[float, int]:
        e = engine(*flags, kv_tokens=12_000)
        head = [{"role": "system", "content": few_shot}, {"role": "user", "content": "Q?"}]
        run_all(e, [e.new_request(head, 8, ignore_eos=True, thinking=False)])
        # Other work fills the pool and evicts the few-shot prefix from the device.
        run_all(
            e,
            [
                e.new_request(f"unrelated {i} " * 2500, 8, ignore_eos=True, thinking=False)
                for i in range(3)
            ],
        )
        again = e.new_request(
            [{"role": "system", "content": few_shot}, {"role": "user", "content": "R?"}],
            8,
            ignore_eos=True,
            thinking=False,
        )
        start = e._t
        times = run_all(e, [again])[0]
        return times[0] - start, e.totals.cached_host_tokens

    recompute, host_plain = ttft()
    reload, host_hits = ttft("--enable-hierarchical-cache", "--hicache-size", "48")
    assert host_plain == 0 and host_hits >= len(few_shot) // 4 - 50
    assert reload < 0.2 * recompute


def test_a_larger_mem_fraction_raises_steady_state_throughput_when_kv_bound():
    from harness.sim.oracle import modelled_steady_state

    flags = [*KIMI_FLAGS, "--stream-interval", "32", "--sim-reasoning-tokens", "4000:0.2"]
    prompts = [f"Write a long proof for problem {i}. " * 8 for i in range(400)]
    low = modelled_steady_state([*flags, "--mem-fraction-static", "0.80"], 64, prompts, 8000, 24)
    high = modelled_steady_state([*flags, "--mem-fraction-static", "0.88"], 64, prompts, 8000, 24)
    assert low.max_total_num_tokens < high.max_total_num_tokens
    assert low.queued > 0 and low.token_usage > 0.8  # KV-bound: a queue at a full pool
    assert high.running > low.running
    assert high.output_tok_s > 1.1 * low.output_tok_s


KIMI_FLAGS = ["--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--trust-remote-code"]


def test_the_decode_line_parses_with_the_harness_parser(caplog):
    for version in ("0.5.23", "0.5.1"):
        e = engine("--sim-sglang-version", version, kv_tokens=50_000, log_interval=5)
        with caplog.at_level(logging.INFO, logger="sglang.scheduler"):
            run_all(e, _requests(e, 3, 64, ignore_eos=True))
        lines = [r.getMessage() for r in caplog.records if "Decode batch" in r.getMessage()]
        stats = [parse_decode_line(line) for line in lines]
        assert stats and all(s is not None for s in stats), lines
        assert any(s.tokens > 0 and s.running_req == 3 for s in stats)
        prefill = [r.getMessage() for r in caplog.records if "Prefill batch" in r.getMessage()]
        assert prefill and "#cached-token: " in prefill[0] and "#queue-req: " in prefill[0]
        caplog.clear()


def test_the_ratio_decays_per_step_to_its_floor_and_is_raised_after_a_retraction():
    ratio = NewTokenRatio()
    assert (ratio.init, round(ratio.min, 4)) == (0.7, 0.098)
    for _ in range(700):
        ratio.decay_step()
    assert ratio.current == ratio.min


def test_a_request_larger_than_the_pool_is_clipped_to_fit_and_ends_by_length():
    """0.5.23 `init_req_max_new_tokens`: max_new_tokens is clipped so that prompt and output fit
    an empty pool (max_req_len = min(context_len - 1, pool - 1)); the request runs alone to the
    clipped length and finishes by "length" instead of waiting for room that never comes."""
    e = engine(kv_tokens=3000)
    (request,) = _requests(e, 1, 8000, ignore_eos=True)
    run_all(e, [request])
    assert request.max_new_tokens == 3000 - request.prompt_tokens - 2
    assert request.generated == request.max_new_tokens and request.finish_reason == "length"


def test_the_oracle_refuses_a_configuration_the_simulator_would_not_start():
    """No KV pool at all (SGLang 0.5.23's default fraction for Kimi-K2.5 on the seeds' box): the
    served simulator dies at start-up, so the model of its load is an error, not a wait."""
    with pytest.raises(ValueError, match=r"would not start.*no_kv_room"):
        modelled_load(KIMI, 1, ["hello"], 16)
