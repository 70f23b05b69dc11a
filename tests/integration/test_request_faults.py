"""Issue 16, streams and readiness against the simulator reproducing SGLang 0.5.23: a request the
server aborts mid-stream, a server that dies with the last request, and readiness without the
INFO "fired up" line (`--log-level warning`)."""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from harness.record.results import Outcome, read_requests
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.sglang.surfaces import READY_LINE
from harness.sim.api.state import ABORT_MESSAGE
from harness.trial import run_trial
from tests.conftest import eagle3, kimi_server, sim_engine
from tests.integration.test_trial_faults import trial


def sse_payloads(response: httpx.Response) -> list[str]:
    return [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]


def test_sim_aborts_a_chat_stream_with_sglangs_error_chunk_then_usage_and_done(tmp_path, port):
    cmd = build_server_command(
        kimi_server(port), sim_engine(200.0, "--sim-load-s", "2", "--sim-fault", "abort-request=1")
    )
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "2+2?"}],
        "max_tokens": 200,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with Server(cmd, tmp_path / "server.log", ready_timeout_s=30, stop_grace_s=5) as server:
        server.wait_ready()
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        with httpx.stream("POST", url, json=body, timeout=30) as response:
            assert response.status_code == 200  # the stream had started: 200, then the error
            payloads = sse_payloads(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    errors = [i for i, c in enumerate(chunks) if "error" in c]
    assert len(errors) == 1 and errors[0] >= 2  # mid-stream: content came first
    assert chunks[errors[0]]["error"] == {
        "object": "error",
        "message": ABORT_MESSAGE,
        "type": "INTERNAL_SERVER_ERROR",
        "param": None,
        "code": 500,
    }
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] >= 2


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_an_aborted_request_is_an_error_and_its_run_is_replaced(tmp_path, port, api):
    # Request 1 is the warm-up, request 2 the first measured one: aborted after two chunks.
    spec = trial(tmp_path, port, "abort-request=2", runs=2, api=api)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OK
    assert [r.incomplete for r in result.runs] == [True, False, False]  # replaced, not counted
    assert result.metrics["incomplete_runs"] == 1 and result.metrics["tok_s_runs"] == 2
    assert result.metrics["error_rate"] == 0.0  # the complete runs had none
    assert "aborted_requests" in result.warnings and "stalled_requests" not in result.warnings
    failed = [r for r in read_requests(tmp_path / "t" / "requests.jsonl") if r.error]
    assert len(failed) == 1 and not failed[0].ok
    assert failed[0].error.startswith("aborted by the server: HTTP 500")
    assert ABORT_MESSAGE in failed[0].error


def test_a_server_that_dies_with_the_last_request_is_not_an_ok_trial(tmp_path, port):
    # warm-up 1 + 3 runs of 1: request 4 is the last; the server dies right at its end.
    spec = trial(tmp_path, port, "die-after-request=4", runs=3)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.CRASH, result.error
    assert "illegal memory access" in result.log_excerpt
    assert len(result.runs) == 3 and "tok_s" in result.metrics  # what was measured is kept
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "crash" and len(saved["runs"]) == 3


def test_readiness_needs_no_info_log_line(tmp_path, port):
    server = eagle3(port, extra_args=("--log-level", "warning"))
    result = run_trial(trial(tmp_path, port, server=server, runs=1), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    assert result.startup_s is not None and result.startup_s > 0
    log = (tmp_path / "t" / "server.log").read_text()
    assert READY_LINE not in log and "Load weight begin" not in log  # no INFO line at all


def test_an_abort_on_sglang_051_cuts_the_stream_and_is_read_as_an_abort(tmp_path, port):
    engine = sim_engine(
        200.0, "--sim-load-s", "2", "--sim-fault", "abort-request=2", version="0.5.1"
    )
    spec = trial(tmp_path, port, runs=2, server=eagle3(port, reasoning_parser="kimi"))
    spec = dataclasses.replace(spec, engine=engine)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    assert [r.incomplete for r in result.runs] == [True, False, False]
    failed = [r for r in read_requests(tmp_path / "t" / "requests.jsonl") if r.error]
    assert len(failed) == 1 and failed[0].error.startswith("aborted by the server")
