"""Does a sweep survive what an unattended night throws at it? (simulated)

Runs every fault scenario of docs/reliability.md against the simulator with the real harness or
the real `python sweep.py -m`, and reports per scenario: survived (the expected outcome, a clean
exit or a clear error), orphans (live processes whose command line carries the scenario's unique
marker afterwards), trials_lost (trials started whose result is in neither their folder nor
MLflow/Optuna) and seconds_to_detect (the server's fatal log line, or its death, to the harness
noticing), against a target for the scenarios where the harness reads a fatal log line (the
tests check that detection happens and is recorded; how fast is checked here). GPU-memory
release needs NVML and a GPU: `held_gpu_memory` runs it against a fake NVML over the
simulator's GPU ledger (harness/sim/shutdown.py).

    python benchmarks/faults.py [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import LedgerNvml, Scratch  # noqa: E402
from benchmarks._faults_sweep import (  # noqa: E402
    interrupt,
    mlflow_down,
    port_taken,
    repeated_crash,
    sigkill_resume,
)
from harness.errors import GpuMemoryHeld, ServerError  # noqa: E402
from harness.measure import lossless  # noqa: E402
from harness.record.results import Outcome  # noqa: E402
from harness.server import gpu  # noqa: E402
from harness.server.command import ServerCommand, build_server_command  # noqa: E402
from harness.server.process import Server  # noqa: E402
from harness.server.procs import processes_mentioning  # noqa: E402
from harness.sim.shutdown import LEDGER_ENV  # noqa: E402
from harness.trial import SilentReporter, run_trial  # noqa: E402

# The server's fatal log line -> the harness noticing it: what a stopped trial may cost on top of
# its failure (the tests once asserted these; timing belongs here).
DETECT_TARGET_S = {"startup_oom": 2.0, "midbench_oom": 2.0, "half_dead_server": 2.0}
DETECT_TARGET_S |= {"capture_crash_not_oom": 2.0, "watchdog_host_oom": 2.0}
# A start-up that goes silent: noticed once silent for engine.stall_timeout_s, within a poll.
STALL_TIMEOUT_S, STALL_READY_TIMEOUT_S = 5.0, 120.0
DETECT_TARGET_S["stalled_startup"] = STALL_TIMEOUT_S + 2.0


def trial_scenario(expect: Outcome, *faults: str, oom_kind: str | None = None, **kw):
    def run(ctx: Scratch) -> dict:
        spec = ctx.spec(*faults, **kw)
        result = run_trial(spec, ctx.dir / "t")
        ok = result.outcome is expect and result.oom_kind == oom_kind
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
            "note": f"{result.outcome}{f' ({result.oom_kind})' if result.oom_kind else ''}: "
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
        "survived": result.outcome is Outcome.CRASH and after.outcome is Outcome.OK,
        "started": 2,
        "recorded": sum((ctx.dir / n / "result.json").is_file() for n in ("killed", "next")),
        "seconds_to_detect": max(noticed - killed_at[0], 0.0) if killed_at else None,
        "note": "crash, then the next trial ok",
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


SCENARIOS: dict[str, Callable[[Scratch], dict]] = {
    "startup_oom": trial_scenario(
        Outcome.OOM, oom_kind="gpu", server_kw={"mem_fraction_static": 0.93}
    ),
    "midbench_oom": trial_scenario(
        Outcome.OOM, "crash-after-tokens=600", oom_kind="gpu", request_timeout_s=600
    ),
    # an illegal memory access behind SGLang's "lower --mem-fraction-static" capture hint
    "capture_crash_not_oom": trial_scenario(Outcome.CRASH, "capture-crash"),
    # the OOM killer takes a scheduler mid-benchmark; SGLang's subprocess watchdog reports it
    "watchdog_host_oom": trial_scenario(
        Outcome.OOM, "host-oom-after-tokens=600", oom_kind="host", request_timeout_s=600
    ),
    "never_ready": trial_scenario(Outcome.TIMEOUT, "hang-at-startup", ready_timeout_s=3),
    "stalled_startup": stalled_startup,
    "stalled_request": trial_scenario(Outcome.OK, "stall-request=2", request_timeout_s=3, runs=2),
    "lossy_outputs": lossy_outputs,
    "killed_from_outside": killed_from_outside,
    "half_dead_server": half_dead_server,
    "port_taken": port_taken,
    "leftover_server": leftover_server,
    "sigint": interrupt(signal.SIGINT),
    "sigterm": interrupt(signal.SIGTERM),
    "sigkill_then_resume": sigkill_resume,
    "mlflow_down_then_sync": mlflow_down,
    "repeated_deterministic_crash": repeated_crash,
    "held_gpu_memory": held_gpu_memory,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/faults.json")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run these only")
    args = parser.parse_args()
    rows = []
    with TemporaryDirectory(prefix="specsweep-faults-") as tmp:
        for name, scenario in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            ctx = Scratch(Path(tmp), name)
            started = time.monotonic()
            try:
                row = scenario(ctx)
            except Exception as exc:  # a scenario that breaks the harness did not survive
                row = {"survived": False, "started": 0, "recorded": 0, "seconds_to_detect": None}
                row["note"] = f"{type(exc).__name__}: {exc}"[:70]
            orphans = processes_mentioning(ctx.marker)
            detect, target = row["seconds_to_detect"], DETECT_TARGET_S.get(name)
            rows.append(
                {
                    "name": name,
                    "survived": bool(row["survived"]) and not orphans,
                    "orphans": len(orphans),
                    "trials_lost": row["started"] - row["recorded"],
                    "seconds_to_detect": detect,
                    "detect_target_s": target,
                    "detected_in_time": None if target is None else detect_in(detect, target),
                    "note": row["note"],
                    "wall_s": round(time.monotonic() - started, 1),
                }
            )
            print(f"{name}: {rows[-1]}", flush=True)
    table = Table(title="Fault scenarios against the simulator (SIMULATED server, real harness)")
    for column in ("scenario", "survived", "orphans", "trials lost", "detect s", "note"):
        table.add_column(column, justify="left" if column in ("scenario", "note") else "right")
    for r in rows:
        detect = "-" if r["seconds_to_detect"] is None else f"{r['seconds_to_detect']:.2f}"
        if r["detect_target_s"] is not None:
            verdict = "≤" if r["detected_in_time"] else "[red]>[/red]"
            detect += f" {verdict} {r['detect_target_s']:g}"
        table.add_row(
            r["name"],
            "yes" if r["survived"] else "[red]NO[/red]",
            str(r["orphans"]),
            str(r["trials_lost"]),
            detect,
            r["note"],
        )
    Console(width=max(Console().width, 140)).print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    keys = ("name", "survived", "orphans", "trials_lost", "seconds_to_detect")
    keys += ("detect_target_s", "detected_in_time")
    report = {"simulated": True, "scenarios": [{k: r[k] for k in keys} for r in rows]}
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    passed = all(r["survived"] and r["detected_in_time"] is not False for r in rows)
    sys.exit(0 if passed else 1)


def detect_in(seconds: float | None, target_s: float) -> bool:
    return seconds is not None and 0 <= seconds <= target_s


if __name__ == "__main__":
    main()
