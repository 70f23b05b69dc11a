"""The simulator as the harness sees it: a real subprocess answering real HTTP on loopback."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.bench import Benchmark, BenchmarkSpec
from harness.clock import ServerClock
from harness.command import build_server_command
from harness.server import Server, port_is_free
from tests.conftest import eagle3, processes_mentioning, sim_engine


@pytest.fixture(scope="module")
def spec_server(tmp_path_factory):
    from tests.conftest import free_port

    port = free_port()
    engine = sim_engine(200.0, "--sim-drafter", "eagle3_37k_ttt5")
    cmd = build_server_command(eagle3(port, mem_fraction_static=0.88), engine)
    server = Server(cmd, tmp_path_factory.mktemp("srv") / "server.log", ready_timeout_s=60)
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


def test_log_has_sglangs_startup_and_ready_lines(spec_server):
    text = spec_server.log_text()
    for line in (
        "Load weight begin",
        "KV Cache is allocated",
        "Capture cuda graph end",
        "Max running requests is reset to 48",
        "The server is fired up and ready to roll!",
    ):
        assert line in text


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
                usage = chunk["usage"] or usage
                chunks.extend(chunk["choices"])
    deltas = [c["delta"] for c in chunks]
    assert any("reasoning_content" in d for d in deltas)
    assert chunks[-1]["finish_reason"] == "length"
    assert usage["completion_tokens"] == 64 and usage["reasoning_tokens"] > 0
    # One chunk per verify step: with speculation some chunks carry several tokens.
    assert len(chunks) < 64


def test_flush_resets_accept_length_and_metrics_exist(spec_server):
    with httpx.Client(base_url=spec_server.command.base_url, timeout=30) as client:
        assert client.post("/flush_cache").status_code == 200
        assert (
            "avg_spec_accept_length" not in client.get("/server_info").json()["internal_states"][0]
        )
        metrics = client.get("/metrics").text
    for name in (
        "sglang:spec_accept_length",
        "sglang:gen_throughput",
        "sglang:spec_verify_calls_total",
        "sglang:generation_tokens_total",
    ):
        assert name in metrics


def test_benchmark_measures_speed_and_window_accept_length(spec_server):
    info = spec_server.server_info()
    spec = BenchmarkSpec(model="m", max_tokens=512, warmup=1, runs=2, requests_per_run=2)
    bench = Benchmark(
        spec_server.command.base_url, spec, ServerClock.from_server_info(info), speculative=True
    )
    result = bench.run()
    assert [r.phase for r in result.records].count("warmup") == 1
    assert len([r for r in result.records if r.phase == "measure"]) == 4
    assert 60 < result.metrics["tok_s"] < 160  # simulated 8x RTX PRO 6000, not a tight bound
    assert 1.5 < result.metrics["accept_len"] < 3.5
    assert all(r.accept_len_source == "server_info" for r in result.runs)
