"""Whole trials against the simulator's fault switches: what is kept, how it is classified, and
that the harness notices (how fast it does is measured in benchmarks/faults.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import time

import httpx
import pytest

from harness.errors import ConfigError, ServerOOM
from harness.record.results import Outcome, read_requests
from harness.server.command import ServerCommand, build_server_command
from harness.server.process import Server
from harness.server.procs import leftover_pid, processes_mentioning
from harness.spec import BenchmarkSpec, TrialSpec
from harness.trial import SilentReporter, run_trial
from tests.conftest import eagle3, kimi_server, sim_engine

# The deadlines a harness that missed the failure would wait for. A trial must end at a small
# fraction of them: that it noticed, not how fast (benchmarks/faults.py measures seconds_to_detect).
REQUEST_DEADLINE_S = 600
READY_DEADLINE_S = 60


def trial(tmp_path, port, *faults: str, server=None, ready_timeout_s=60, **bench) -> TrialSpec:
    extra = [arg for fault in faults for arg in ("--sim-fault", fault)]
    values = dict(model="m", max_tokens=256, warmup=1, runs=3, requests_per_run=1)
    values.update(bench)
    return TrialSpec(
        name="t",
        role="trial",
        number=None,
        engine=sim_engine(200.0, "--sim-load-s", "2", *extra, ready_timeout_s=ready_timeout_s),
        server=server or eagle3(port),
        benchmark=BenchmarkSpec(**values),
        pid_file=tmp_path / "servers" / f"port-{port}.pid",
    )


def test_oom_mid_benchmark_keeps_completed_runs_and_is_noticed_at_once(tmp_path, port):
    # Warm-up 256 + run 1 256 tokens fit; run 2 crosses 600 and the server dies mid-stream.
    spec = trial(tmp_path, port, "crash-after-tokens=600", request_timeout_s=REQUEST_DEADLINE_S)
    started = time.monotonic()
    result = run_trial(spec, tmp_path / "t")
    assert time.monotonic() - started < REQUEST_DEADLINE_S / 10  # not waited out
    assert result.outcome is Outcome.OOM and result.oom_kind == "gpu"
    assert "CUDA out of memory" in result.log_excerpt
    assert len(result.runs) >= 1 and "tok_s" in result.metrics  # partial results kept
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "oom" and len(saved["runs"]) == len(result.runs)
    measured = [r for r in read_requests(tmp_path / "t" / "requests.jsonl") if r.ok]
    assert len(measured) >= 2  # the warm-up and run 1 at least
    assert detection_recorded(result.detect_s)
    assert processes_mentioning(f"--port {port} ") == []


@pytest.mark.parametrize(
    ("fault", "text", "kind"),
    [
        (
            "kv-oom-after-tokens=600",
            "Decode out of memory. Try to lower your batch size.",
            "kv_pool",
        ),
        ("host-oom-after-tokens=600", "crashed with exit code -9. Triggering SIGQUIT", "host"),
    ],
)
def test_memory_failures_mid_benchmark_are_ooms_of_their_kind(tmp_path, port, fault, text, kind):
    # Warm-up 256 + run 1 256 tokens fit; run 2 crosses 600 and the server dies as SGLang does.
    spec = trial(tmp_path, port, fault, request_timeout_s=REQUEST_DEADLINE_S)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OOM and result.oom_kind == kind, result.error
    assert text in result.log_excerpt
    assert len(result.runs) >= 1  # what was measured before is kept
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "oom" and saved["oom_kind"] == kind
    assert processes_mentioning(f"--port {port} ") == []


def test_a_capture_crash_that_is_not_out_of_memory_is_a_crash(tmp_path, port):
    result = run_trial(trial(tmp_path, port, "capture-crash"), tmp_path / "t")
    assert result.outcome is Outcome.CRASH and result.oom_kind is None, result.error
    assert "Capture cuda graph failed: CUDA error: an illegal memory access" in result.log_excerpt
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "crash" and saved["oom_kind"] is None


def test_a_hybrid_pool_that_does_not_fit_is_a_kv_pool_oom(tmp_path, port):
    result = run_trial(trial(tmp_path, port, "hybrid-pool-oom"), tmp_path / "t")
    assert result.outcome is Outcome.OOM and result.oom_kind == "kv_pool", result.error


def test_stalled_request_marks_its_run_incomplete_and_the_trial_goes_on(tmp_path, port):
    # Request 2 is the first measured one: it gets one token, then nothing.
    spec = trial(tmp_path, port, "stall-request=2", request_timeout_s=3, runs=2)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OK
    assert [r.incomplete for r in result.runs] == [True, False, False]  # replaced, not counted
    assert result.metrics["incomplete_runs"] == 1 and result.metrics["tok_s_runs"] == 2
    assert "stalled_requests" in result.warnings
    stalled = [r for r in read_requests(tmp_path / "t" / "requests.jsonl") if r.error]
    assert len(stalled) == 1 and "stalled" in stalled[0].error


def detection_recorded(detect_s: float | None) -> bool:
    """The harness measured the time from the fatal log line to noticing it."""
    return detect_s is not None and math.isfinite(detect_s) and detect_s >= 0


class KillOnFirstRun(SilentReporter):
    """Kills the server's process group from outside once the first run is measured."""

    def __init__(self, pid_file):
        self.pid_file = pid_file

    def run_done(self, summary, total_runs):
        if summary.run == 1:
            os.killpg(json.loads(self.pid_file.read_text())["pid"], signal.SIGKILL)


def test_server_killed_from_outside_is_a_crash_and_the_next_trial_runs(tmp_path, port):
    spec = trial(tmp_path, port, request_timeout_s=REQUEST_DEADLINE_S)
    started = time.monotonic()
    result = run_trial(spec, tmp_path / "killed", KillOnFirstRun(spec.pid_file))
    assert time.monotonic() - started < REQUEST_DEADLINE_S / 10  # not waited out
    assert result.outcome is Outcome.CRASH
    assert "killed by SIGKILL" in result.error and "from outside" in result.error
    assert len(result.runs) == 1  # the run measured before the kill is kept
    assert processes_mentioning(f"--port {port} ") == []
    after = run_trial(trial(tmp_path, port, runs=1), tmp_path / "next")
    assert after.outcome is Outcome.OK


def test_server_that_never_gets_ready_is_a_timeout(tmp_path, port):
    spec = trial(tmp_path, port, "hang-at-startup", ready_timeout_s=3)
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.TIMEOUT and "not ready after 3 s" in result.error
    assert processes_mentioning(f"--port {port} ") == []


def test_a_start_up_that_stalls_is_a_timeout_at_its_phase_long_before_the_ready_deadline(
    tmp_path, port
):
    """The weight bar stops part-way and nothing more is printed: the trial ends once the server
    has been silent for engine.stall_timeout_s, says where it stalled, and stops the server."""
    spec = trial(tmp_path, port, "hang-at-startup", ready_timeout_s=READY_DEADLINE_S)
    spec = dataclasses.replace(spec, engine=dataclasses.replace(spec.engine, stall_timeout_s=5))
    started = time.monotonic()
    result = run_trial(spec, tmp_path / "t")
    assert time.monotonic() - started < READY_DEADLINE_S / 3  # not the ready deadline
    assert result.outcome is Outcome.TIMEOUT
    assert result.error.startswith("stalled at loading weights "), result.error
    assert "shards)" in result.error and "no output for" in result.error
    assert [m["phase"] for m in result.startup_marks] == ["launching", "loading weights"]
    assert "Loading safetensors checkpoint shards" in result.log_excerpt
    assert processes_mentioning(f"--port {port} ") == []
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "timeout" and saved["startup_marks"] == result.startup_marks


def test_a_trial_records_its_start_up_phases(tmp_path, port):
    result = run_trial(trial(tmp_path, port, runs=1), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error
    phases = [m["phase"] for m in result.startup_marks]
    assert phases[:3] == ["launching", "loading weights", "allocating the KV pool"]
    assert "capturing target verify CUDA graph" in phases and "warm-up" in phases
    for key in ("startup_load_weight_s", "startup_cuda_graph_target_verify_s"):
        assert result.startup_phases[key] > 0 and result.metrics[key] == result.startup_phases[key]
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["startup_phases"] == result.startup_phases


def test_startup_oom_is_detected_and_its_detection_time_recorded(tmp_path, port):
    spec = trial(tmp_path, port, server=eagle3(port, mem_fraction_static=0.93))
    result = run_trial(spec, tmp_path / "t")
    assert result.outcome is Outcome.OOM and result.oom_kind == "gpu"
    assert detection_recorded(result.detect_s)
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["detect_s"] == result.detect_s


HALF_DEAD = """
import sys, time
print("[2026-01-01 00:00:00] Load weight begin. avail mem=90.00 GB", flush=True)
print("[2026-01-01 00:00:01] Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of "
      "memory. Tried to allocate 2.00 GiB", flush=True)
time.sleep(120)  # the launcher never kills itself: a half-dead server
"""


def test_a_server_whose_log_says_it_died_is_not_waited_for(tmp_path, port):
    marker = f"half-dead-{port}"
    cmd = ServerCommand(
        argv=(sys.executable, "-c", HALF_DEAD, marker),
        env={},
        base_url=f"http://127.0.0.1:{port}",
        host="127.0.0.1",
        port=port,
    )
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=READY_DEADLINE_S, stop_grace_s=1)
    started = time.monotonic()
    with server, pytest.raises(ServerOOM, match="log reports a fatal error"):
        server.wait_ready()
    assert time.monotonic() - started < READY_DEADLINE_S / 2  # not waited out
    assert detection_recorded(server.detect_s)
    assert processes_mentioning(marker) == []


def test_api_key_is_enforced_sent_and_never_written_down(tmp_path, port):
    key = "sk-sim-api-key-0042"
    server_spec = eagle3(port, api_key=key)
    result = run_trial(trial(tmp_path, port, server=server_spec, runs=1), tmp_path / "t")
    assert result.outcome is Outcome.OK, result.error  # the client authenticated
    for path in (tmp_path / "t").iterdir():
        assert key not in path.read_text(errors="replace"), path
    assert "<redacted>" in (tmp_path / "t" / "server.log").read_text()  # SGLang logs its args
    assert '"$SGLANG_API_KEY"' in (tmp_path / "t" / "command.sh").read_text()

    cmd = build_server_command(kimi_server(port, api_key=key), sim_engine(200.0))
    pid_file = tmp_path / "servers" / "p.pid"
    with Server(cmd, tmp_path / "s.log", ready_timeout_s=60, pid_file=pid_file) as server:
        server.wait_ready()
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/v1/models").status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200  # exempt, as in SGLang
        info = httpx.get(f"{url}/server_info", headers=server.command.headers)
        assert info.status_code == 200 and key not in info.text
        assert key not in pid_file.read_text()
        assert leftover_pid(pid_file) == server.pid  # still recognised without the key


def test_a_broken_drafter_is_refused_before_anything_launches(tmp_path, port):
    drafter = tmp_path / "drafter"
    drafter.mkdir()  # no weights: the drafter gate's static check fails
    server = dataclasses.replace(eagle3(port), speculative_draft_model_path=str(drafter))
    spec = trial(tmp_path, port, server=server)
    with pytest.raises(ConfigError, match=r"drafter check failed: .*no \*\.safetensors file"):
        run_trial(spec, tmp_path / "t")
    assert not (tmp_path / "t").exists()  # no folder, no command, no server
    assert processes_mentioning(f"--port {port} ") == []


def test_a_trial_the_machine_cannot_take_is_not_recorded_ok(tmp_path, port):
    import socket

    from harness.errors import PortInUse

    with socket.socket() as sock:  # the port is busy: nothing launches, the sweep must stop
        sock.bind(("127.0.0.1", port))
        sock.listen()
        with pytest.raises(PortInUse):
            run_trial(trial(tmp_path, port), tmp_path / "t")
    saved = json.loads((tmp_path / "t" / "result.json").read_text())
    assert saved["outcome"] == "error" and saved["error"].startswith("not launched: port")
    assert not saved["metrics"]
