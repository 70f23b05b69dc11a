"""The simulator's fault switches do what harness/sim/faults.py says, seen from outside."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from harness.errors import ServerCrashed, ServerOOM, ServerStartTimeout
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.server.procs import wait_until
from harness.sim.faults import Faults
from tests.conftest import kimi_server, sim_engine


def start(tmp_path, port, *faults: str, clock_scale: float = 200.0) -> Server:
    extra = [arg for fault in faults for arg in ("--sim-fault", fault)]
    cmd = build_server_command(
        kimi_server(port), sim_engine(clock_scale, "--sim-load-s", "2", *extra)
    )
    return Server(cmd, tmp_path / "server.log", ready_timeout_s=30, stop_grace_s=5)


def generate(port: int, max_new_tokens: int, timeout: float = 30) -> httpx.Response:
    body = {"text": "2+2?", "sampling_params": {"max_new_tokens": max_new_tokens}}
    return httpx.post(f"http://127.0.0.1:{port}/generate", json=body, timeout=timeout)


def test_crash_after_tokens_dies_with_sglangs_oom_text_and_sigkill(tmp_path, port):
    with start(tmp_path, port, "crash-after-tokens=200") as server:
        server.wait_ready()
        assert generate(port, 50).status_code == 200  # below the threshold: fine
        with pytest.raises(httpx.HTTPError):
            generate(port, 2000)
        deadline = time.monotonic() + 10
        while server.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.returncode == -9
        log = server.log_text()
        assert "torch.OutOfMemoryError: CUDA out of memory" in log
        assert "Received sigquit from a child process" in log
        with pytest.raises(ServerOOM):
            server.raise_if_exited("benchmark")


def test_stalled_request_gets_one_token_and_the_next_request_is_served(tmp_path, port):
    with start(tmp_path, port, "stall-request=1") as server:
        server.wait_ready()
        body = {"text": "hi", "sampling_params": {"max_new_tokens": 100}, "stream": True}
        chunks = 0
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream(
                "POST", f"http://127.0.0.1:{port}/generate", json=body, timeout=2
            ) as response,
        ):
            for line in response.iter_lines():
                chunks += line.startswith("data: {")
        assert chunks == 1
        assert generate(port, 50).status_code == 200


def test_refuse_connections_prints_ready_but_accepts_nothing(tmp_path, port):
    with start(tmp_path, port, "refuse-connections") as server:
        deadline = time.monotonic() + 20
        while "fired up" not in server.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "fired up" in server.log_text()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        assert server.returncode is None  # alive


def test_refuse_connections_after_n_requests(tmp_path, port):
    with start(tmp_path, port, "refuse-connections-after=1") as server:
        server.wait_ready()
        assert generate(port, 20).status_code == 200
        with pytest.raises(httpx.ConnectError):
            generate(port, 20, timeout=2)


def test_hang_at_startup_never_gets_ready(tmp_path, port):
    server = start(tmp_path, port, "hang-at-startup")
    server.ready_timeout_s = 2
    with server, pytest.raises(ServerStartTimeout):
        server.wait_ready()
    assert "Load weight begin" in server.log_text()
    assert "Load weight end" not in server.log_text()


def test_slow_start_adds_wall_seconds(tmp_path, port):
    with start(tmp_path, port, "slow-start=1.5") as server:
        t0 = time.monotonic()
        server.wait_ready()
        assert time.monotonic() - t0 >= 1.5


def test_capture_crash_is_an_illegal_memory_access_behind_sglangs_oom_hint(tmp_path, port):
    server = start(tmp_path, port, "capture-crash")
    with server, pytest.raises(ServerCrashed) as exc:
        server.wait_ready()
    assert exc.value.returncode == -9
    log = server.log_text()
    assert "Exception: Capture cuda graph failed: CUDA error: an illegal memory access" in log
    assert "set --mem-fraction-static to a smaller value" in log  # the wrapper's hint all the same
    assert "out of memory" not in log


def test_hybrid_pool_oom_fails_start_up_with_sglangs_text(tmp_path, port):
    server = start(tmp_path, port, "hybrid-pool-oom")
    with server, pytest.raises(ServerOOM) as exc:
        server.wait_ready()
    assert exc.value.returncode == -9 and exc.value.kind == "kv_pool"
    assert "Not enough GPU memory for hybrid (mamba/linear-attention) state cache" in (
        server.log_text()
    )


@pytest.mark.parametrize(
    ("fault", "texts", "kind"),
    [
        # one token: the first request's prefill is what finds no room
        (
            "kv-oom-after-tokens=1",
            ["Prefill out of memory. Try to lower your batch size."],
            "kv_pool",
        ),
        (
            "kv-oom-after-tokens=200",
            ["Decode out of memory. Try to lower your batch size."],
            "kv_pool",
        ),
        (
            "host-oom-after-tokens=200",
            [
                "Subprocess scheduler_0 (pid=",
                ") crashed with exit code -9. Triggering SIGQUIT for cleanup...",
                "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
            ],
            "host",
        ),
    ],
)
def test_memory_failures_after_start_up_die_like_sglang(tmp_path, port, fault, texts, kind):
    with start(tmp_path, port, fault) as server:
        # the ready line, not wait_ready: its /health_generate would be the first request
        assert wait_until(lambda: "fired up" in server.log_text(), deadline_s=20)
        with pytest.raises(httpx.HTTPError):
            generate(port, 2000)
        assert wait_until(lambda: server.returncode is not None, deadline_s=10)
        assert server.returncode == -9
        log = server.log_text()
        for text in texts:
            assert text in log
        with pytest.raises(ServerOOM) as exc:
            server.raise_if_exited("benchmark")
        assert exc.value.kind == kind


@pytest.mark.parametrize("fault", ["host-oom-after-tokens=10", "hybrid-pool-oom"])
def test_faults_051_cannot_show_are_refused_under_its_surface(fault):
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "harness.sim", "--model-path", "m"),
            *("--sim-sglang-version", "0.5.1", "--sim-fault", fault),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "needs the current surface" in proc.stderr


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("explode", "unknown --sim-fault 'explode'"),
        ("stall-request=x", "needs an integer"),
        ("hang-at-startup=3", "takes no value"),
        ("report-version=", "needs a non-empty text"),
    ],
)
def test_bad_fault_is_a_usage_error(fault, message):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.sim", "--model-path", "m", "--sim-fault", fault],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr


def test_fault_parsing():
    faults = Faults.parse(["crash-after-tokens=10", "refuse-connections"])
    assert faults.crash_after_tokens == 10 and faults.refuse_connections_after == 0
    faults = Faults.parse(["capture-crash", "kv-oom-after-tokens=5", "host-oom-after-tokens=7"])
    assert faults.capture_crash and faults.kv_oom_after_tokens == 5
    assert faults.host_oom_after_tokens == 7 and faults.given("host-oom-after-tokens")
    assert not faults.given("hybrid-pool-oom")
    assert not Faults.parse([]).any
    faults = Faults.parse(["report-version=0.5.24", "drop-server-info-field=tp_size"])
    assert faults.report_version == "0.5.24" and faults.drop_server_info_field == "tp_size"
    assert faults.given("report-version") and faults.any
