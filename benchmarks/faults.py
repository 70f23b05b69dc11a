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

    python benchmarks/faults.py [--json PATH] [--only NAME ...] [--smoke]

The full form writes docs/results/faults.md; `--smoke` (CI) runs SMOKE_SCENARIOS, the trial-level
scenarios and one through `python sweep.py -m`, with the same checks (tests/e2e holds the other
sweep-level ones as tests).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import (  # noqa: E402
    Scratch,
    add_smoke_flag,
    output_path,
    write_json,
    write_results,
)
from benchmarks._faults_sweep import (  # noqa: E402
    interrupt,
    mlflow_down,
    port_taken,
    repeated_crash,
    sigkill_resume,
)
from benchmarks._faults_trial import (  # noqa: E402
    STALL_TIMEOUT_S,
    half_dead_server,
    held_gpu_memory,
    killed_from_outside,
    leftover_server,
    lossy_outputs,
    stalled_startup,
    trial_scenario,
)
from harness.record.results import Outcome  # noqa: E402
from harness.server.procs import processes_mentioning  # noqa: E402

# The server's fatal log line -> the harness noticing it: what a stopped trial may cost on top of
# its failure (the tests once asserted these; timing belongs here).
DETECT_TARGET_S = {"startup_oom": 2.0, "midbench_oom": 2.0, "half_dead_server": 2.0}
DETECT_TARGET_S |= {"capture_crash_not_oom": 2.0, "watchdog_host_oom": 2.0}
# A start-up that goes silent: noticed once silent for engine.stall_timeout_s, within a poll.
DETECT_TARGET_S["stalled_startup"] = STALL_TIMEOUT_S + 2.0


SCENARIOS: dict[str, Callable[[Scratch], dict]] = {
    # above what the seeds' box holds: the CUDA-graph capture (or warm-up) runs out of memory
    "startup_oom": trial_scenario(
        Outcome.OOM,
        reached="CUDA out of memory",
        oom_kind="gpu",
        server_kw={"mem_fraction_static": 0.93},
    ),
    "midbench_oom": trial_scenario(
        Outcome.OOM,
        "crash-after-tokens=600",
        reached="(simulated fault after",
        oom_kind="gpu",
        request_timeout_s=600,
    ),
    # an illegal memory access behind SGLang's "lower --mem-fraction-static" capture hint
    "capture_crash_not_oom": trial_scenario(
        Outcome.CRASH, "capture-crash", reached="an illegal memory access was encountered"
    ),
    # the OOM killer takes a scheduler mid-benchmark; SGLang's subprocess watchdog reports it
    "watchdog_host_oom": trial_scenario(
        Outcome.OOM,
        "host-oom-after-tokens=600",
        reached="crashed with exit code -9",
        oom_kind="host",
        request_timeout_s=600,
    ),
    # the weight bar starts, then stops redrawing: timed out at the ready deadline
    "never_ready": trial_scenario(
        Outcome.TIMEOUT,
        "hang-at-startup",
        reached="Loading safetensors checkpoint shards",
        ready_timeout_s=3,
    ),
    "stalled_startup": stalled_startup,
    "stalled_request": trial_scenario(
        Outcome.OK,
        "stall-request=2",
        reached="stalls after its first token",
        request_timeout_s=3,
        runs=2,
    ),
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


# The smoke form's scenarios: every one that runs a trial through the real harness (seconds each),
# and one through the real `python sweep.py -m`; the other sweep-level ones take a minute each.
SMOKE_SCENARIOS = (
    *("startup_oom", "midbench_oom", "capture_crash_not_oom", "watchdog_host_oom"),
    *("never_ready", "stalled_request", "lossy_outputs", "killed_from_outside"),
    *("half_dead_server", "leftover_server", "held_gpu_memory", "port_taken"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/faults.json")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run these only")
    add_smoke_flag(parser)
    args = parser.parse_args()
    chosen = args.only or (SMOKE_SCENARIOS if args.smoke else tuple(SCENARIOS))
    rows = []
    with TemporaryDirectory(prefix="specsweep-faults-") as tmp:
        for name, scenario in SCENARIOS.items():
            if name not in chosen:
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
    for column in ("scenario", "survived", "orphans", "trials lost", "detect s", "note", "wall s"):
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
            f"{r['wall_s']:.0f}",
        )
    Console(width=max(Console().width, 140)).print(table)
    keys = ("name", "survived", "orphans", "trials_lost", "seconds_to_detect")
    keys += ("detect_target_s", "detected_in_time", "note", "wall_s")
    report = {"simulated": True, "scenarios": [{k: r[k] for k in keys} for r in rows]}
    write_json(output_path(args.json, args.smoke or bool(args.only)), report, "faults")
    failed = [
        r["name"]
        for r in rows
        if not r["survived"] or r["trials_lost"] or r["detected_in_time"] is False
    ]
    summary = f"{len(rows) - len(failed)} of {len(rows)} scenarios survived, detected in time, "
    summary += "with nothing orphaned or lost"
    summary += f"; FAILED: {', '.join(failed)}" if failed else ""
    print(summary)
    if not args.only:  # a subset is a look at some scenarios, not the table of them all
        write_results("faults", [table], simulated=True, smoke=args.smoke, notes=(summary,))
    sys.exit(1 if failed else 0)


def detect_in(seconds: float | None, target_s: float) -> bool:
    return seconds is not None and 0 <= seconds <= target_s


if __name__ == "__main__":
    main()
