"""Failures are classified from real processes: OOM, crash, timeout, busy port, stray children."""

from __future__ import annotations

import signal
import socket
import sys
import time

import pytest

from benchmarks._common import LedgerNvml
from harness.errors import GpuMemoryHeld, PortInUse, ServerCrashed, ServerOOM, ServerStartTimeout
from harness.server import gpu
from harness.server.command import ServerCommand, build_server_command
from harness.server.process import Server
from harness.server.procs import port_is_free, processes_mentioning, wait_until
from harness.sim.shutdown import LEDGER_ENV
from tests.conftest import eagle3, kimi_server, sim_engine

real_nvml = gpu._nvml


def test_mem_fraction_093_ooms_like_sglang(tmp_path, port):
    cmd = build_server_command(eagle3(port, mem_fraction_static=0.93), sim_engine())
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=60, mem_fraction_static=0.93)
    with server, pytest.raises(ServerOOM) as exc:
        server.wait_ready()
    assert exc.value.returncode == -9  # the launcher SIGKILLs itself after the scheduler fails
    assert exc.value.mem_fraction_static == 0.93
    assert "Capture cuda graph failed: CUDA out of memory" in exc.value.log_excerpt
    assert "set --mem-fraction-static to a smaller value" in exc.value.log_excerpt


def test_too_low_mem_fraction_is_not_enough_memory(tmp_path, port):
    cmd = build_server_command(kimi_server(port, mem_fraction_static=0.70), sim_engine())
    with (
        Server(cmd, tmp_path / "server.log", ready_timeout_s=60) as srv,
        pytest.raises(ServerOOM) as exc,
    ):
        srv.wait_ready()
    # 0.5.23 (kv_cache_configurator.py): the weights (74,741 MiB) exceed 0.70 x 97,887 MiB
    assert (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.7. Raise --mem-fraction-static above 0.764"
        in exc.value.log_excerpt
    )


def test_without_the_flag_the_simulator_reports_sglangs_default(tmp_path, port):
    # SGLang 0.5.23's default for Kimi-K2.5 with --max-running-requests 48: 0.842 x 0.9097
    spec = kimi_server(port, mem_fraction_static=None, max_running_requests=48)
    cmd = build_server_command(spec, sim_engine())
    assert "--mem-fraction-static" not in cmd.argv
    with Server(cmd, tmp_path / "server.log", ready_timeout_s=60) as srv:
        srv.wait_ready()
        info = srv.server_info()
    assert round(info["mem_fraction_static"], 3) == 0.766
    log = (tmp_path / "server.log").read_text()
    assert "Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations" in log


def test_bad_flag_is_a_crash_with_argparse_message(tmp_path, port):
    # A flag no table knows reaches the server, which exits 2 like argparse does. (A flag of the
    # other SGLang era never gets this far: see tests/unit/test_flags.py.)
    cmd = build_server_command(
        kimi_server(port, extra_args=("--cuda-graph-max-bs-dcode", "16")), sim_engine()
    )
    with (
        Server(cmd, tmp_path / "server.log", ready_timeout_s=60) as srv,
        pytest.raises(ServerCrashed) as exc,
    ):
        srv.wait_ready()
    assert exc.value.returncode == 2
    assert "unrecognized arguments: --cuda-graph-max-bs-dcode" in exc.value.log_excerpt


def test_never_ready_is_a_timeout_and_the_server_is_stopped(tmp_path, port):
    cmd = build_server_command(kimi_server(port), sim_engine(clock_scale=1.0))  # 90 s to load
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=2, stop_grace_s=2)
    with server, pytest.raises(ServerStartTimeout):
        server.wait_ready()
    assert server.returncode is not None
    assert port_is_free("127.0.0.1", port)


def test_busy_port_is_refused_before_launch(tmp_path, port):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        cmd = build_server_command(kimi_server(port), sim_engine())
        with pytest.raises(PortInUse, match=f"port {port}"):
            Server(cmd, tmp_path / "server.log", ready_timeout_s=5).start()
    assert not (tmp_path / "server.log").exists()


FAKE_SERVER = """
import os, signal, sys, time
marker = sys.argv[1]
if os.fork() == 0:  # a child that ignores SIGTERM, like a wedged scheduler
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.execv(sys.executable, [sys.executable, "-c",
             "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
             marker])
time.sleep(600)
"""


def test_stop_kills_the_whole_group_even_children_that_ignore_sigterm(tmp_path, port):
    marker = f"specsweep-test-{port}"
    cmd = ServerCommand(
        argv=(sys.executable, "-c", FAKE_SERVER, marker),
        env={},
        base_url=f"http://127.0.0.1:{port}",
        host="127.0.0.1",
        port=port,
    )
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=5, stop_grace_s=1)
    server.start()
    deadline = time.monotonic() + 10
    while len(processes_mentioning(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_mentioning(marker)) == 2
    rc = server.stop()
    assert rc == -signal.SIGTERM
    assert processes_mentioning(marker) == []
    assert server.stop() == rc  # idempotent


@pytest.mark.parametrize("version", ["0.5.23", "0.5.1"])
@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"mem_fraction_static": 0.93}, "gpu"),
        ({"mem_fraction_static": 0.70}, "kv_pool"),
        ({"mem_fraction_static": 0.85, "hicache_size": 200}, "host"),  # 200 GB x TP 8 > 1 TB
    ],
)
def test_memory_failures_are_typed_in_both_log_formats(tmp_path, port, version, overrides, kind):
    from tests.conftest import KIMI_PARSER

    spec = eagle3(port, reasoning_parser=KIMI_PARSER[version], **overrides)
    cmd = build_server_command(spec, sim_engine(version=version))
    with (
        Server(cmd, tmp_path / "server.log", ready_timeout_s=60) as server,
        pytest.raises(ServerOOM) as exc,
    ):
        server.wait_ready()
    assert exc.value.kind == kind
    if kind == "gpu":
        flag = "--cuda-graph-max-bs " if version == "0.5.1" else "--cuda-graph-max-bs-decode "
        assert flag in exc.value.log_excerpt  # the version's own advice


def test_a_leftover_is_found_by_its_command_line_when_its_pid_was_never_written(tmp_path, port):
    """The sweep was killed between launching the server and recording its pid: the record made
    before the launch (pid null) still leads its successor to the server."""
    import json
    import threading

    from harness.server.procs import leftover_pid, stop_leftover

    pid_file = tmp_path / "server.pid"
    cmd = build_server_command(kimi_server(port), sim_engine())
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=60, pid_file=pid_file)
    server.start()
    try:
        record = json.loads(pid_file.read_text())
        pid_file.write_text(json.dumps({**record, "pid": None}))
        assert leftover_pid(pid_file) == server.pid
        # A real leftover's parent is gone and init reaps it; here this test is the parent.
        reaper = threading.Thread(target=server.proc.wait, daemon=True)
        reaper.start()
        assert stop_leftover(pid_file, grace_s=5) == server.pid
        reaper.join(timeout=30)
        assert server.proc.returncode is not None
        assert not pid_file.exists()
    finally:
        server.stop()
    assert processes_mentioning(f"--port {port} ") == []


def test_a_rerun_in_the_same_folder_starts_a_fresh_log(tmp_path, port):
    """server.log holds one server: a second launch into the same folder replaces the first
    one's log instead of appending to it (an appended log would also offer the first server's
    "fired up" line to the second one's readiness check)."""
    log = tmp_path / "server.log"
    for name in ("first", "second"):
        script = f"import time; print('server {name}', flush=True); time.sleep(60)"
        cmd = ServerCommand(
            argv=(sys.executable, "-c", script),
            env={},
            base_url=f"http://127.0.0.1:{port}",
            host="127.0.0.1",
            port=port,
        )
        with Server(cmd, log, ready_timeout_s=60, stop_grace_s=1):
            assert wait_until(lambda: log.read_text() != "", deadline_s=30)  # it printed
    assert log.read_text() == "server second\n"


@pytest.mark.parametrize("version", ["0.5.23", "0.5.1"])
def test_stop_follows_sglangs_order_so_the_scheduler_releases_the_gpu(
    tmp_path, port, monkeypatch, version
):
    """SIGTERM to the launcher only: it drains and (0.5.23) sends its scheduler a ShutdownReq,
    and the scheduler releases its GPU memory before it exits. A SIGTERM to the whole group
    (the old order) kills the scheduler, which has no SIGTERM handler, before it released:
    its memory stays held and the next launch is refused with GpuMemoryHeld."""
    ledger = tmp_path / "gpu"
    ledger.mkdir()
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    monkeypatch.setattr(gpu, "_UNRELEASED", {})
    monkeypatch.setattr(gpu, "_nvml", lambda module=None: real_nvml(LedgerNvml(ledger)))
    from tests.conftest import KIMI_PARSER

    spec = kimi_server(port, reasoning_parser=KIMI_PARSER[version])
    cmd = build_server_command(spec, sim_engine(version=version))
    server = Server(
        cmd, tmp_path / "server.log", ready_timeout_s=60, stop_grace_s=30, gpu_release_timeout_s=1
    )
    with server:
        server.wait_ready()
        assert [entry.name for entry in ledger.iterdir()] != []  # the scheduler holds memory
    log = server.log_text()
    assert "SIGTERM received. signum=None frame=None. Draining requests" in log
    if version == "0.5.23":
        assert server.returncode == 0  # released, then sys.exit(0)
        assert list(ledger.iterdir()) == []
        assert server.gpu_release_s is not None
        gpu.check_gpu_released()  # nothing held: the next launch may go ahead
    else:  # 0.5.1.post3 kills its tree and itself (no ShutdownReq): the memory stays charged
        assert server.returncode == -signal.SIGKILL
        with pytest.raises(GpuMemoryHeld, match=r"pid \d+ \(.*harness\.sim.*MiB on GPU 0\)"):
            gpu.check_gpu_released()
    assert processes_mentioning(f"--port {port}") == []


def test_ctrl_c_while_the_server_starts_leaves_no_server(tmp_path, port, monkeypatch):
    """A KeyboardInterrupt inside start(), after the process exists: `with` calls no __exit__
    for an __enter__ that raised, so the server must stop itself (a resolve round's Ctrl-C
    landed there and left one running)."""
    cmd = build_server_command(kimi_server(port), sim_engine(50.0))
    calls = []

    def interrupted(self, pid):
        calls.append(pid)
        if pid is not None:  # the second record, after the launch
            raise KeyboardInterrupt

    monkeypatch.setattr(Server, "_record_pid", interrupted)
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=30, stop_grace_s=2)
    with pytest.raises(KeyboardInterrupt), server:
        pass
    assert calls[-1] is not None  # the process had started
    assert wait_until(lambda: processes_mentioning(f"--port {port} ") == [], deadline_s=5)


def test_ctrl_c_inside_the_log_pumps_start_is_the_interrupt_and_the_server_stops(
    tmp_path, port, monkeypatch
):
    """A Ctrl-C that lands while the log pump's thread is being started (Thread.start waits for
    it) leaves a thread that never ran: stopping the server must not try to join it, or the
    interrupt turns into "cannot join thread before it is started" and the sweep goes on."""
    import threading

    from harness.server import process

    class Interrupted(threading.Thread):
        def start(self) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(process.threading, "Thread", Interrupted)
    cmd = build_server_command(kimi_server(port=port), sim_engine())
    server = Server(cmd, tmp_path / "server.log", ready_timeout_s=60)
    with pytest.raises(KeyboardInterrupt), server:
        pass
    assert server.proc is not None and server.proc.poll() is not None  # stopped, not left behind
