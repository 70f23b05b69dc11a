"""The simulator speaks enough of SGLang 0.5.23's API for SGLang's own client (issue 16): OpenAI
/v1/completions, /generate with input_ids, Prometheus counters a flush never resets, the
speculative gauges, and /flush_cache's idle race with its `?timeout=` (docs/reliability.md)."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.measure.prometheus import prometheus_values
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.server.procs import free_port
from tests.conftest import eagle3, sim_engine

DRAIN_S = 2.0  # the slow-drain fault: the step after the last response lasts this much longer


def _server(tmp_path_factory, *extra: str, version: str = "0.5.23", **spec) -> Server:
    port = free_port()
    engine = sim_engine(200.0, "--sim-drafter", "eagle3_37k_ttt5", *extra, version=version)
    cmd = build_server_command(eagle3(port, mem_fraction_static=0.88, **spec), engine)
    return Server(cmd, tmp_path_factory.mktemp("srv") / "server.log", ready_timeout_s=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with _server(tmp_path_factory) as srv:
        srv.wait_ready()
        yield srv


@pytest.fixture(scope="module")
def racy_server(tmp_path_factory):
    """Every drain (the overlap scheduler's last step) lasts DRAIN_S more wall seconds."""
    srv = _server(tmp_path_factory, "--sim-fault", f"slow-drain={DRAIN_S}", decode_log_interval=1)
    with srv:
        srv.wait_ready()
        yield srv


def _events(response: httpx.Response) -> list[dict]:
    return [
        json.loads(line[6:])
        for line in response.iter_lines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_completions_stream_and_whole_with_usage(server):
    body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
    with httpx.Client(base_url=server.command.base_url, timeout=30) as client:
        whole = client.post("/v1/completions", json=body)
        assert whole.status_code == 200
        answer = whole.json()
        assert answer["object"] == "text_completion" and answer["model"] == "m"
        assert answer["id"].startswith("cmpl-")
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"]["completion_tokens"] == 40
        stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
        with client.stream("POST", "/v1/completions", json=stream) as response:
            assert response.status_code == 200
            events = _events(response)
    *chunks, last = events
    assert all(c["object"] == "text_completion" and len(c["choices"]) == 1 for c in chunks)
    assert all(c["usage"] is None for c in chunks)  # usage only on the last chunk
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 40
    # greedy: the same text streamed and whole
    assert "".join(c["choices"][0]["text"] for c in chunks) == answer["choices"][0]["text"]


def test_generate_takes_input_ids(server):
    with httpx.Client(base_url=server.command.base_url, timeout=30) as client:
        ids = list(range(100, 337))
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 8}}
        answer = client.post("/generate", json=body)
        assert answer.status_code == 200
        assert answer.json()["meta_info"]["prompt_tokens"] == len(ids)
        completion = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 4})
        assert completion.json()["usage"]["prompt_tokens"] == len(ids)
        refused = client.post("/generate", json={"sampling_params": {"max_new_tokens": 8}})
        assert refused.status_code == 400
        assert "Either text, input_ids or input_embeds should be provided." in refused.text


def test_flush_keeps_prometheus_totals_and_exports_spec_gauges(server):
    with httpx.Client(base_url=server.command.base_url, timeout=60) as client:
        body = {"text": "Count to ten.", "sampling_params": {"max_new_tokens": 64}}
        assert client.post("/generate", json=body).status_code == 200
        before = prometheus_values(client.get("/metrics").text)
        flushed = client.post("/flush_cache", params={"timeout": 30})
        assert flushed.status_code == 200 and flushed.text.endswith("performed.)\n")
        after = prometheus_values(client.get("/metrics").text)
    for name in (
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
        "sglang:num_requests_total",
        "sglang:spec_verify_calls_total",
    ):
        assert after[name] == before[name] > 0, name  # a counter never goes backwards
    for name in (  # 0.5.23 metrics_collector.py's speculative gauges
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:spec_cap_length",
        "sglang:spec_block_accept_length",
        "sglang:spec_num_steps",
        "sglang:spec_num_draft_tokens",
    ):
        assert name in after, name
    assert 0 < after["sglang:spec_accept_rate"] <= 1
    # what a flush does reset: the scheduler's running average (/server_info)
    assert "avg_spec_accept_length" not in server.server_info()["internal_states"][0]


def test_counters_move_when_a_streamed_request_finishes_not_while_it_streams(server):
    """0.5.23 observe_one_finished_request: the token counters hold a request once it finished,
    in its is_streaming series, with the tokenizer's labels (no rank)."""
    body = {"model": "m", "prompt": "Tell a long story.", "max_tokens": 8000, "stream": True}
    with httpx.Client(base_url=server.command.base_url, timeout=60) as client:
        before = prometheus_values(client.get("/metrics").text)
        with client.stream("POST", "/v1/completions", json={**body, "ignore_eos": True}) as r:
            lines = r.iter_lines()
            data: list[str] = []
            for line in lines:
                data += [line] if line.startswith("data: ") else []
                if len(data) == 20:
                    break
            during = prometheus_values(client.get("/metrics").text)
            rest = [line for line in lines if line.startswith("data: ")]
        text = client.get("/metrics").text
    after = prometheus_values(text)
    assert len(data) == 20 and rest[-1] == "data: [DONE]"
    assert during["sglang:num_running_reqs"] == 1  # still running when `during` was read
    for name in ("sglang:generation_tokens_total", "sglang:num_requests_total"):
        assert during[name] == before[name], name  # 20 chunks out, nothing counted yet
    gen, reqs = "sglang:generation_tokens_total", "sglang:num_requests_total"
    assert (after[gen] - before[gen], after[reqs] - before[reqs]) == (8000, 1)
    assert 'is_streaming="true"' in text
    counter = next(line for line in text.splitlines() if line.startswith("sglang:num_requests"))
    assert "tp_rank" not in counter


def test_flush_right_after_a_response_meets_the_idle_race(racy_server):
    body = {"text": "Name three primes.", "sampling_params": {"max_new_tokens": 16}}
    with httpx.Client(base_url=racy_server.command.base_url, timeout=60) as client:
        assert client.post("/generate", json=body).status_code == 200
        refused = client.post("/flush_cache")  # the overlap queue is still draining
        assert refused.status_code == 400 and refused.text == "Flush cache failed.\n"
        assert client.post("/generate", json=body).status_code == 200
        waited = client.post("/flush_cache", params={"timeout": 30})  # waits for idle
        assert waited.status_code == 200
    assert "Cache not flushed because there are pending requests." in racy_server.log_text()


def _run_accept(records, run: int) -> float:
    """The run's accept length from its own requests' verify counts (exact, per request)."""
    mine = [r for r in records if r.phase == "measure" and r.run == run]
    return sum(r.completion_tokens - 1 for r in mine) / sum(r.verify_ct for r in mine)


def test_harness_retries_a_flush_refused_by_the_idle_race_so_the_counters_cover_one_run(
    racy_server, monkeypatch
):
    """Issue 15's must-show: the simulator refuses the harness's first flush (the overlap
    queue still drains), the harness retries, and the server's speculative counters after each
    run cover that run only."""
    import harness.measure.flush as flush_module
    from harness.measure.bench import Benchmark
    from harness.measure.clock import ServerClock
    from harness.measure.schedule import Run
    from harness.spec import BenchmarkSpec

    spec = BenchmarkSpec(model="m", max_tokens=128, warmup=1, runs=2, requests_per_run=1)
    info = racy_server.server_info()
    bench = Benchmark(
        racy_server.command.base_url,
        spec,
        ServerClock.from_server_info(info),
        speculative=True,
    )

    def server_accept() -> float:
        return racy_server.server_info()["internal_states"][0]["avg_spec_accept_length"]

    with bench:
        bench.warm_up()
        # Run 1: SGLang's wait for idle (?timeout=) shorter than the drain: the first attempt is
        # refused ("Timed out waiting for idle state."), a retry after the backoff succeeds.
        monkeypatch.setattr(flush_module, "FLUSH_WAIT_S", DRAIN_S / 10)
        assert bench.flush()
        first = bench.measure(Run(1, 1))
        assert first.flushed is True and first.flush_attempts >= 2
        assert server_accept() == pytest.approx(_run_accept(bench.records, 1))
        # Run 2: the default wait outlasts the drain: one attempt, SGLang waits for idle.
        monkeypatch.setattr(flush_module, "FLUSH_WAIT_S", 10 * DRAIN_S)
        assert bench.flush()
        second = bench.measure(Run(2, 1))
        assert second.flushed is True and second.flush_attempts == 1
        assert server_accept() == pytest.approx(_run_accept(bench.records, 2))
    log = racy_server.log_text()
    assert "Deferred flush_cache timed out while waiting for idle state." in log
