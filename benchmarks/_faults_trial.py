"""The fault scenarios that run one trial (or a server) through the real harness
(benchmarks/faults.py runs them): faults the simulator injects, a server killed from outside, a
half-dead one, one left over by a crashed sweep, GPU memory a stopped server keeps. Each returns
what faults.py reports: survived, trials started and recorded, seconds to detect, and a note."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

from benchmarks._common import ROOT, LedgerNvml, Scratch
from harness.errors import GpuMemoryHeld, ServerError
from harness.measure import lossless
from harness.record.results import Outcome
from harness.server import gpu
from harness.server.command import ServerCommand, build_server_command
from harness.server.process import Server
from harness.server.procs import processes_mentioning
from harness.sim.shutdown import LEDGER_ENV
from harness.trial import SilentReporter, run_trial

# A start-up that goes silent: noticed once silent for engine.stall_timeout_s, within a poll.
STALL_TIMEOUT_S, STALL_READY_TIMEOUT_S = 5.0, 120.0


def trial_scenario(expect: Outcome, *faults: str, reached: str, oom_kind: str | None = None, **kw):
    """One trial with `faults` injected, expected to end as `expect`; `reached` is the text the
    fault itself writes to the server's log, so an outcome that came from something else (a
    start-up OOM before the fault's turn) is not counted as the fault survived."""

    def run(ctx: Scratch) -> dict:
        spec = ctx.spec(*faults, **kw)
        result = run_trial(spec, ctx.dir / "t")
        log = ctx.dir / "t" / "server.log"
        hit = log.is_file() and reached in log.read_text(errors="replace")
        ok = hit and result.outcome is expect and result.oom_kind == oom_kind
        if expect is Outcome.CRASH:
            ok = ok and result.detect_s is not None  # noticed from its fatal line
        if expect is Outcome.OOM:
            ok = ok and result.detect_s is not None
        if "stall-request=2" in faults:
            ok = ok and "stalled_requests" in result.warnings
        if "crash-after-tokens=600" in faults:
            ok = ok and len(result.runs) >= 1  # partial results kept
        return {
            "survived": ok,
            "started": 1,
            "recorded": int((ctx.dir / "t" / "result.json").is_file()),
            "seconds_to_detect": result.detect_s,
            "note": ("" if hit else f"fault not reached ({reached!r} not in its log): ")
            + f"{result.outcome}{f' ({result.oom_kind})' if result.oom_kind else ''}: "
            + (result.error or "ok").splitlines()[0][:70],
        }

    return run


def stalled_startup(ctx: Scratch) -> dict:
    """The weight bar stops part-way (the hang-at-startup fault): the trial ends as timeout
    "stalled at loading weights ..." once the server has been silent for engine.stall_timeout_s,
    not at the ready deadline; seconds_to_detect is its last output to the harness raising."""
    spec = ctx.spec("hang-at-startup", ready_timeout_s=STALL_READY_TIMEOUT_S)
    engine = dataclasses.replace(spec.engine, stall_timeout_s=STALL_TIMEOUT_S)
    result = run_trial(dataclasses.replace(spec, engine=engine), ctx.dir / "t")
    error = result.error or ""
    ok = result.outcome is Outcome.TIMEOUT and error.startswith("stalled at loading weights")
    return {
        "survived": ok,
        "started": 1,
        "recorded": int((ctx.dir / "t" / "result.json").is_file()),
        "seconds_to_detect": result.detect_s,
        "note": f"{result.outcome} after {result.startup_wall_s or 0:.1f} s of "
        f"{STALL_READY_TIMEOUT_S:.0f}: {error.split(':')[0][:50]}",
    }


def lossy_outputs(ctx: Scratch) -> dict:
    """A speculative server whose greedy outputs part from the baseline's at token 8: measured,
    flagged outputs_diverge, the divergence index recorded (harness/measure/lossless.py)."""
    base = run_trial(ctx.spec(runs=1), ctx.dir / "base")
    reference = ctx.dir / "base" / lossless.FILE
    spec = dataclasses.replace(
        ctx.spec("lossy-after-tokens=8", runs=1), lossless_reference=reference
    )
    result = run_trial(spec, ctx.dir / "t")
    indices = {a["first_divergent_token"] for a in result.lossless}
    ok = base.outcome is Outcome.OK and result.outcome is Outcome.OK
    ok = ok and "outputs_diverge" in result.warnings and indices == {8}
    recorded = sum((ctx.dir / d / "result.json").is_file() for d in ("base", "t"))
    return {
        "survived": ok,
        "started": 2,
        "recorded": recorded,
        "seconds_to_detect": None,
        "note": f"{result.outcome}, warnings {result.warnings}, first divergent {sorted(indices)}",
    }


def killed_from_outside(ctx: Scratch) -> dict:
    killed_at: list[float] = []

    class Killer(SilentReporter):
        def run_done(self, summary, total_runs):
            if summary.run == 1 and not killed_at:
                pid = json.loads(spec.pid_file.read_text())["pid"]
                killed_at.append(time.monotonic())
                os.killpg(pid, signal.SIGKILL)

    spec = ctx.spec(request_timeout_s=600)
    result = run_trial(spec, ctx.dir / "killed", Killer())
    noticed = time.monotonic() - (result.teardown_s or 0)
    after = run_trial(ctx.spec(runs=1), ctx.dir / "next")
    return {
        # the fault is the kill after the first measured run: a crash before it is another one
        "survived": bool(killed_at)
        and result.outcome is Outcome.CRASH
        and after.outcome is Outcome.OK,
        "started": 2,
        "recorded": sum((ctx.dir / n / "result.json").is_file() for n in ("killed", "next")),
        "seconds_to_detect": max(noticed - killed_at[0], 0.0) if killed_at else None,
        "note": "crash, then the next trial ok"
        if killed_at
        else f"never killed: {result.outcome}: {(result.error or 'ok').splitlines()[0][:50]}",
    }


def half_dead_server(ctx: Scratch) -> dict:
    """The log says the scheduler died; the launcher lingers (the seeds' half-killed server)."""
    code = (
        "import time; print('Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of "
        "memory', flush=True); time.sleep(300)"
    )
    cmd = ServerCommand(
        argv=(sys.executable, "-c", code, ctx.marker),
        env={},
        base_url=f"http://127.0.0.1:{ctx.port}",
        host="127.0.0.1",
        port=ctx.port,
    )
    server = Server(cmd, ctx.dir / "server.log", ready_timeout_s=120, stop_grace_s=1)
    error = None
    with server:
        try:
            server.wait_ready()
        except ServerError as exc:
            error = exc
    return {
        "survived": error is not None,
        "started": 0,
        "recorded": 0,
        "seconds_to_detect": server.detect_s,
        "note": f"{type(error).__name__}; its ready timeout was 120 s",
    }


LEFTOVER = """
import json, os, sys
from pathlib import Path
from harness.measure import lossless  # noqa: E402
from harness.server.command import ServerCommand
from harness.server.process import Server
argv, port, log, pid_file = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cmd = ServerCommand(tuple(argv), {}, f"http://127.0.0.1:{port}", "127.0.0.1", port)
server = Server(cmd, Path(log), ready_timeout_s=60, pid_file=Path(pid_file))
server.start()
server.wait_ready()
os._exit(0)  # a crashed sweep: no stop, the pid file stays, the server is orphaned
"""


def leftover_server(ctx: Scratch) -> dict:
    spec = ctx.spec(runs=1)
    argv = build_server_command(spec.server, spec.engine).argv
    subprocess.run(
        [
            *(sys.executable, "-c", LEFTOVER, json.dumps(argv), str(ctx.port)),
            *(str(ctx.dir / "leftover.log"), str(spec.pid_file)),
        ],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    was_orphaned = bool(processes_mentioning(ctx.marker))
    result = run_trial(spec, ctx.dir / "t")
    return {
        "survived": result.outcome is Outcome.OK and was_orphaned,
        "started": 1,
        "recorded": int((ctx.dir / "t" / "result.json").is_file()),
        "seconds_to_detect": None,
        "note": "pid file found, leftover stopped, trial ok",
    }


def held_gpu_memory(ctx: Scratch) -> dict:
    """0.5.23 stopped in SGLang's order releases its scheduler's memory (gpu_release_s measured);
    0.5.1.post3's self-kill leaves it charged: waited for twice, then the next launch is refused
    with GpuMemoryHeld naming the holder (pid, command line, MiB, GPU)."""
    ledger = ctx.dir / "gpu"
    ledger.mkdir()
    real_nvml, os.environ[LEDGER_ENV] = gpu._nvml, str(ledger)
    gpu._nvml = lambda module=None: real_nvml(LedgerNvml(ledger))
    try:
        spec = ctx.spec(runs=1)
        clean = run_trial(spec, ctx.dir / "t1")
        args = tuple(
            "0.5.1" if a == spec.engine.sglang_version else a for a in spec.engine.extra_args
        )
        engine = replace(spec.engine, sglang_version="0.5.1", extra_args=args)
        old = replace(spec, engine=replace(engine, gpu_release_timeout_s=0.5))
        held = run_trial(
            replace(old, server=replace(spec.server, reasoning_parser="kimi")), ctx.dir / "t2"
        )
        try:
            run_trial(spec, ctx.dir / "t3")
            named = ""
        except GpuMemoryHeld as exc:
            named = str(exc) if "harness.sim" in str(exc) and "MiB on GPU 0" in str(exc) else ""
    finally:
        gpu._nvml = real_nvml
        os.environ.pop(LEDGER_ENV, None)
        gpu._UNRELEASED.clear()
    ok = clean.outcome is held.outcome is Outcome.OK and clean.gpu_release_s is not None
    return {
        "survived": ok and bool(named),
        "started": 2,  # the third launch is refused before anything starts
        "recorded": sum((ctx.dir / t / "result.json").is_file() for t in ("t1", "t2")),
        "seconds_to_detect": None,
        "note": f"0.5.23 released in {clean.gpu_release_s or 0:.2f} s; 0.5.1 held: refused",
    }
