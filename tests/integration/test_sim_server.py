"""The simulator as the harness sees it: a real subprocess answering real HTTP on loopback."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.measure.bench import Benchmark
from harness.measure.clock import ServerClock
from harness.record.stats import summarize
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.server.procs import port_is_free, processes_mentioning
from harness.spec import BenchmarkSpec
from tests.conftest import eagle3, sim_engine


# Every test here runs against both output formats the harness parses: SGLang 0.5.23 and 0.5.1.
@pytest.fixture(scope="module", params=["0.5.23", "0.5.1"])
def spec_server(request, tmp_path_factory):
    from harness.server.procs import free_port
    from tests.conftest import KIMI_PARSER

    version = request.param
    port = free_port()
    engine = sim_engine(200.0, "--sim-drafter", "eagle3_37k_ttt5", version=version)
    spec = eagle3(port, mem_fraction_static=0.88, reasoning_parser=KIMI_PARSER[version])
    cmd = build_server_command(spec, engine)
    server = Server(cmd, tmp_path_factory.mktemp("srv") / "server.log", ready_timeout_s=60)
    server.version = version
    with server:
        server.wait_ready()
        yield server
    assert port_is_free("127.0.0.1", port)
    assert not processes_mentioning(f"--port {port} ")


def test_server_info_reports_effective_args_and_clock(spec_server):
    info = spec_server.server_info()
    assert info["speculative_num_steps"] == 3 and info["speculative_num_draft_tokens"] == 4
    assert info["max_running_requests"] == 48  # SGLang's speculative default
    assert info["max_total_num_tokens"] > 100_000
    assert info["simulator"]["clock_scale"] == 200.0 and info["simulator"]["simulated"] is True
    assert ServerClock.from_server_info(info).scale == 200.0
    with httpx.Client(base_url=spec_server.command.base_url) as client:
        assert client.get("/get_server_info").json()["version"] == info["version"]
        if spec_server.version == "0.5.1":  # only the old endpoint, the old field names
            assert info["version"] == "0.5.1.post3"
            assert client.get("/server_info").status_code == 404
            assert info["cuda_graph_max_bs"] == 48 and "cuda_graph_max_bs_decode" not in info
            assert info["disable_overlap_schedule"] is True  # EAGLE forces overlap off there
        else:
            assert info["version"] == "0.5.23"
            # 0.5.23 resolves the batch into cuda_graph_config; the flag field stays as given
            assert info["cuda_graph_config"]["decode"]["max_bs"] == 48
            assert info["cuda_graph_max_bs_decode"] is None
            assert info["disable_overlap_schedule"] is False


def test_log_has_sglangs_startup_and_ready_lines(spec_server):
    from harness.server.logs import parse_decode_line

    text = spec_server.log_text()
    # 0.5.23 names each capture (model_runner_components/cuda_graph_setup.py); 0.5.1 one.
    capture = (
        "Capture cuda graph end"
        if spec_server.version == "0.5.1"
        else ("Capture target verify CUDA graph end")
    )
    for line in (
        "Load weight begin",
        "KV Cache is allocated",
        capture,
        "The server is fired up and ready to roll!",
    ):
        assert line in text
    if spec_server.version == "0.5.1":
        assert "Overlap scheduler is disabled because of using eagle speculative decoding" in text
        assert "Max running requests is reset" not in text  # 0.5.1 resets it silently
    else:
        assert "Max running requests is reset to 48" in text
    Benchmark(
        spec_server.command.base_url,
        BenchmarkSpec(model="m", max_tokens=256, warmup=0, runs=1, requests_per_run=1),
        ServerClock.from_server_info(spec_server.server_info()),
        speculative=True,
    ).run()
    decode = [ln for ln in spec_server.log_text().splitlines() if "Decode batch" in ln]
    assert decode and all(parse_decode_line(ln) is not None for ln in decode)
    stats = parse_decode_line(decode[-1])
    assert stats.accept_len is not None and stats.cuda_graph is True
    marker = "Decode batch." if spec_server.version == "0.5.1" else "Decode batch,"
    assert all(marker in ln for ln in decode)
    assert (stats.accept_rate is None) == (spec_server.version == "0.5.1")


def test_streaming_chat_separates_reasoning_and_counts_tokens(spec_server):
    body = {
        "messages": [{"role": "user", "content": "Prove that 2 + 2 = 4."}],
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks, usage = [], None
    with (
        httpx.Client(base_url=spec_server.command.base_url, timeout=30) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage  # 0.5.23: only on the usage chunk
                chunks.extend(chunk["choices"])
    deltas = [c["delta"] for c in chunks]
    assert any(d.get("reasoning_content") for d in deltas)
    assert chunks[-1]["finish_reason"] == "length"
    assert usage["completion_tokens"] == 64
    # 0.5.1 always reports 0 reasoning tokens in chat usage; 0.5.23 counts them.
    assert (usage["reasoning_tokens"] > 0) == (spec_server.version == "0.5.23")
    # One chunk per verify step: with speculation some chunks carry several tokens.
    assert len(chunks) < 64


def test_flush_resets_accept_length_and_metrics_exist(spec_server):
    with httpx.Client(base_url=spec_server.command.base_url, timeout=30) as client:
        assert client.post("/flush_cache").status_code == 200
        assert "avg_spec_accept_length" not in spec_server.server_info()["internal_states"][0]
        metrics = client.get("/metrics").text
    for name in (
        "sglang:spec_accept_length",
        "sglang:gen_throughput",
        "sglang:generation_tokens_total",
    ):
        assert name in metrics
    # The verify counter exists only from 0.5.10 on: 0.5.1 runs read the log lines instead.
    assert ("sglang:spec_verify_calls_total" in metrics) == (spec_server.version == "0.5.23")


def test_benchmark_measures_speed_and_window_accept_length(spec_server):
    info = spec_server.server_info()
    spec = BenchmarkSpec(model="m", max_tokens=512, warmup=1, runs=2, requests_per_run=2)
    bench = Benchmark(
        spec_server.command.base_url,
        spec,
        ServerClock.from_server_info(info),
        speculative=True,
        server_log=spec_server.log_path,
    )
    result = bench.run()
    assert [r.phase for r in result.records].count("warmup") == 1
    assert len([r for r in result.records if r.phase == "measure"]) == 4
    assert 60 < result.metrics["tok_s"] < 160  # simulated 8x RTX PRO 6000, not a tight bound
    assert 1.5 < result.metrics["accept_len"] < 3.5
    measured = [r for r in result.records if r.phase == "measure"]
    assert all(r.chunks and r.reasoning_ended is not None for r in measured)
    if spec_server.version == "0.5.23":
        # Per-request verify counts in the chat response: the best source for the run's window.
        assert all(r.accept_len_source == "request_meta" for r in result.runs)
        assert all(r.verify_ct for r in measured)
    else:
        # 0.5.1's chat responses and metrics carry no verify counts: the decode log lines do.
        assert all(r.accept_len_source == "log" for r in result.runs)
    assert "itl_ms_p99_c1" in result.metrics and "ttft_ms_p50_c1" in result.metrics


def test_native_generate_api_measures_the_same_way(spec_server):
    info = spec_server.server_info()
    spec = BenchmarkSpec(
        model="m",
        api="generate",
        max_tokens=256,
        warmup=0,
        runs=2,
        requests_per_run=2,
        ignore_eos=True,
    )
    result = Benchmark(
        spec_server.command.base_url, spec, ServerClock.from_server_info(info), speculative=True
    ).run()
    measured = [r for r in result.records if r.phase == "measure"]
    assert all(r.completion_tokens == 256 and r.finish_reason == "length" for r in measured)
    assert all(r.verify_ct for r in measured)  # both versions put spec_verify_ct in meta_info
    assert {r.accept_len_source for r in result.runs} == {"request_meta"}
    if spec_server.version == "0.5.23":
        assert all(r.accepted_tokens is not None for r in measured)
        # spec_correct_drafts_histogram: every verify step by its accepted drafts, the last whole
        assert all(sum(r.drafts_histogram) == r.verify_ct for r in measured)
        assert all(
            sum(j * n for j, n in enumerate(r.drafts_histogram)) >= r.accepted_tokens
            for r in measured
        )
    else:  # 0.5.1.post3 reports the verify count only
        assert all(r.drafts_histogram is None for r in measured)
    assert 60 < result.metrics["tok_s"] < 200


def adaptive_runs(server, target_ci_pct: float, max_runs: int) -> list[float]:
    """The decode tok/s of each run an adaptive benchmark measured."""
    spec = BenchmarkSpec(
        model="m",
        max_tokens=128,
        warmup=0,
        runs=2,
        requests_per_run=1,
        adaptive=True,
        target_ci_pct=target_ci_pct,
        max_runs=max_runs,
    )
    clock = ServerClock.from_server_info(server.server_info())
    runs = Benchmark(server.command.base_url, spec, clock, speculative=True).run().runs
    return [r.decode_tok_s for r in runs]


def ci_pct(values: list[float]) -> float:
    stat = summarize(values)
    return 100 * stat.ci95 / stat.mean


def test_adaptive_runs_stop_at_the_first_run_whose_interval_meets_the_target(spec_server):
    # Runs of one 128-token request vary by 2-15% here and t = 12.7 at one degree of freedom, so
    # how many runs a target takes depends on the draws; the rule does not: a run more only while
    # the interval is wider than the target, up to max_runs.
    for target, cap in ((50.0, 6), (25.0, 10)):
        runs = adaptive_runs(spec_server, target_ci_pct=target, max_runs=cap)
        assert 2 <= len(runs) <= cap
        assert len(runs) == cap or ci_pct(runs) <= target
        assert len(runs) == 2 or ci_pct(runs[:-1]) > target
    # Out of reach: the cap ends it.
    assert len(adaptive_runs(spec_server, target_ci_pct=0.001, max_runs=4)) == 4


def test_window_pitfall_requests_in_flight_at_the_window_start(tmp_path, port):
    """The seeds' 1190-vs-600 tok/s mistake, reproduced on a real stream: counting completions in
    a window that opens while requests are in flight credits it with earlier tokens."""
    from harness.measure.metrics import naive_window_rate, tokens_in_window
    from harness.server.command import server_flags
    from harness.server.process import Server as _Server
    from harness.sim.oracle import modelled_load
    from harness.workload import load_prompts
    from tests.conftest import kimi_server

    flags = ("--sim-drift", "0", "--sim-load-s", "2")
    server = kimi_server(port)
    command = build_server_command(server, sim_engine(5.0, *flags))  # slow: robust under load
    spec = BenchmarkSpec(
        model="m",
        max_tokens=256,
        warmup=0,
        runs=1,
        concurrency=(4,),
        requests_per_level=(4,),  # steady state: 4 completions of ramp-up, 4 in the window
        ignore_eos=True,
    )
    with _Server(command, tmp_path / "server.log", ready_timeout_s=60) as srv:
        srv.wait_ready()
        clock = ServerClock.from_server_info(srv.server_info())
        bench = Benchmark(command.base_url, spec, clock, speculative=False)
        bench.run()
    lines = [t for t in bench.timelines if t.record.ok]  # the 8 completed: two waves
    first_start = min(t.record.start_s for t in lines)
    ends = sorted(t.record.end_s for t in lines)
    start = first_start + (ends[3] - first_start) / 2  # four streams half-way through
    end = ends[-1]
    true_rate = tokens_in_window(lines, start, end) / (end - start)
    naive = naive_window_rate([t.record for t in lines], start, end)
    prompts = [p.messages[0]["content"] for p in load_prompts("builtin", 0, spec.categories)]
    model = modelled_load([*server_flags(server), *flags], 4, prompts[:8], 256)
    assert true_rate == pytest.approx(model.output_tok_s, rel=0.06)
    assert naive > 1.2 * true_rate  # every completion counted whole: the inflated number


def test_a_greedy_output_depends_on_the_prompt_alone(spec_server):
    """SGLang's non-streamed /generate answer carries text and output_ids (tokenizer_manager.py,
    0.5.23 and 0.5.1.post3); at temperature 0 the same prompt gets the same tokens, whatever
    was asked before (the lossless check compares them across servers)."""
    body = {
        "text": "Prove that the square root of two is irrational.",
        "sampling_params": {"max_new_tokens": 40, "temperature": 0.0, "ignore_eos": True},
    }
    with httpx.Client(base_url=spec_server.command.base_url, timeout=60) as client:
        first = client.post("/generate", json=body).json()
        client.post("/generate", json={**body, "text": "Something else entirely."})
        again = client.post("/generate", json=body).json()
    assert len(first["output_ids"]) == 40 and first["text"]
    assert (again["output_ids"], again["text"]) == (first["output_ids"], first["text"])


def test_startup_draws_sglangs_bars_with_carriage_returns_and_reports_its_phases(spec_server):
    from harness.server.startup import READY, WEIGHTS, StartupTracker, startup_phases

    raw = spec_server.log_path.read_bytes()
    # tqdm's redraws, kept as SGLang's own redirected output has them: one line, many \r.
    bar = next(ln for ln in raw.split(b"\n") if b"Loading safetensors checkpoint shards" in ln)
    assert bar.count(b"\r") > 10
    assert b"100% Completed | 64/64" in bar
    tracker = StartupTracker()
    for piece in raw.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        tracker.feed(piece)
    phases = [m.phase for m in tracker.marks]
    assert phases[:2] == ["launching", WEIGHTS] and phases[-1] == READY
    info = spec_server.server_info()
    recorded = startup_phases(info)
    if spec_server.version == "0.5.1":
        assert recorded == {}  # 0.5.1 reports no startup_time
        return
    assert "capturing target verify CUDA graph" in phases
    assert "capturing draft extend CUDA graph" in phases
    assert recorded["startup_load_weight_s"] > 0
    assert recorded["startup_cuda_graph_target_verify_s"] > 0
    metrics = httpx.get(f"{spec_server.command.base_url}/metrics").text
    assert "sglang:startup_time_seconds{" in metrics and 'phase="load_weight"} ' in metrics
    assert "sglang:startup_cuda_graph_time_seconds{" in metrics
