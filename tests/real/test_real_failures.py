"""How real SGLang 0.5.23 fails on this CPU, and what the harness makes of it: a fraction too
small for the KV pool is a start-up KV OOM with SGLang's own text; a port taken while it starts
is a port failure although SGLang prints that it is fired up; Ctrl-C in the middle of a sweep's
run leaves no process behind. None of them calls a stand-in. The simulator, given the same
tiny fraction, fails with the same text and return code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from harness.errors import PortInUse, ServerOOM
from harness.record.results import Outcome, TrialResult
from harness.server.command import build_server_command
from harness.server.process import Server
from harness.server.procs import free_port, wait_until
from harness.sglang.surfaces import READY_LINE
from harness.spec import EngineSpec, ServerSpec
from tests.real.conftest import CPU_ENV, CPU_FLAGS, DRAFTER, ROOT, TARGET, sglang_processes

pytestmark = pytest.mark.real


def real_server(python, port: int, log, *extra: str) -> Server:
    spec = ServerSpec(
        model_path=str(TARGET), port=port, extra_args=(*CPU_FLAGS, *extra), env=CPU_ENV
    )
    engine = EngineSpec(
        name="sglang",
        program=(str(python), "-m", "sglang.launch_server"),
        sglang_version="0.5.23",
        ready_timeout_s=300,
        stall_timeout_s=120,
        stop_grace_s=30,
    )
    command = build_server_command(spec, engine)
    return Server(command, log, ready_timeout_s=300, stall_timeout_s=120, stop_grace_s=30)


def simulator(port: int, log, *extra: str) -> Server:
    spec = ServerSpec(model_path=str(TARGET), port=port, extra_args=(*CPU_FLAGS, *extra))
    sim = ("--sim-hardware", "h100_sxm", "--sim-target", "llama31_8b", "--sim-clock-scale", "50")
    engine = EngineSpec(name="sim", program=("python", "-m", "harness.sim"), extra_args=sim)
    return Server(build_server_command(spec, engine), log, ready_timeout_s=60, stop_grace_s=10)


def test_a_tiny_fraction_is_a_start_up_kv_pool_oom_with_sglangs_text(
    real_env, standin_calls, tmp_path
):
    server = real_server(
        real_env, free_port(), tmp_path / "server.log", "--mem-fraction-static", "0.0001"
    )
    with pytest.raises(ServerOOM) as caught, server:
        server.wait_ready()
    assert caught.value.kind == "kv_pool"
    assert (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.0001"
        in caught.value.log_excerpt
    )
    assert server.returncode == -9  # the launcher kills its tree and itself
    assert standin_calls() == [] and sglang_processes() == []
    # the simulator, asked the same, fails the same way (its numbers are a GPU's)
    sim = simulator(free_port(), tmp_path / "sim.log", "--mem-fraction-static", "0.0001")
    with pytest.raises(ServerOOM) as simulated, sim:
        sim.wait_ready()
    assert simulated.value.kind == "kv_pool" and sim.returncode == server.returncode
    text = "ValueError: Loaded weights leave no GPU memory for the KV cache under "
    assert text in caught.value.log_excerpt and text in simulated.value.log_excerpt


def test_a_port_taken_during_start_up_is_a_port_failure_despite_the_fired_up_line(
    real_env, standin_calls, tmp_path
):
    port = free_port()
    server = real_server(real_env, port, tmp_path / "server.log")
    squatter = simulator(port, tmp_path / "squatter.log")
    # The port was free when the harness launched SGLang, which binds it 20-40 s later; another
    # server takes it meanwhile.
    with server, squatter:
        squatter.wait_ready()
        # SGLang's warm-up reaches the other server, so it says it is ready; it is not
        assert wait_until(lambda: READY_LINE in server.log_text(), deadline_s=240)
        with pytest.raises(PortInUse, match=f"port {port} was taken by pid {squatter.pid}"):
            server.wait_ready()
    log = server.log_text()
    assert "[Errno 98] error while attempting to bind on address" in log
    assert standin_calls() == [] and sglang_processes() == []


def test_ctrl_c_in_the_middle_of_a_run_leaves_no_process(real_env, standin_calls, tmp_path):
    argv = [
        sys.executable,
        "sweep.py",
        "-m",
        "experiment=real_cpu",
        f"tracking.dir={tmp_path / 'results'}",
        "search.study_name=tiny-llama-cpu-interrupt",
        f"server.port={free_port()}",
        f"model.path={TARGET}",
        f"drafter.path={DRAFTER}",
        f"engine.program=[{real_env},-m,sglang.launch_server]",
        "benchmark.warmup=0",
        "benchmark.max_tokens=256",  # a run long enough to be inside when Ctrl-C comes
        "report=false",
        "verbose=true",  # its server's ready line and run 1's, which time the Ctrl-C
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sweep = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # a terminal's Ctrl-C: SIGINT to the sweep's process group
    )  # fmt: skip
    seen, server_pids = [], []
    try:
        for line in sweep.stdout:
            seen.append(line)
            if "run 1/" in line or ("ready in" in line and not server_pids):
                server_pids = [int(p.split()[0]) for p in sglang_processes()]
            if "run 1/" in line:
                break
        assert server_pids, "".join(seen)
        time.sleep(0.5)  # inside run 2's requests
        os.killpg(sweep.pid, signal.SIGINT)
        interrupted = time.monotonic()
        rest, _ = sweep.communicate(timeout=120)
        print(f"the sweep exited {time.monotonic() - interrupted:.1f} s after Ctrl-C")
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode != 0, "".join(seen) + rest
    assert not [
        p
        for p in server_pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert sglang_processes() == []
    base = TrialResult.read(
        next((tmp_path / "results" / "tiny-llama-cpu-interrupt").glob("baseline*"))
    )
    assert base.outcome is Outcome.INTERRUPTED
    assert standin_calls() == []
