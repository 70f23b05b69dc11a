"""GPU slots: wall time of a fixed set of trials with 1, 2 and 4 slots (SIMULATED).

Runs `python sweep.py -m` on the simulator's single-GPU profile (Llama-3.1-8B, TP 1, on a
simulated 4x H100 box: `hardware.gpus=4`) with the same eight distinct configurations enqueued,
so every setting launches exactly eight servers; only `worker.slots` changes. The time is the
sweep's trials phase (`trials_wall_s` in its summary: from the first ask to the last tell), as a
ratio to one slot. The servers are simulators on a virtual clock: this measures how well the
sweeper overlaps trials, not GPU throughput.

    python benchmarks/parallel_speedup.py [--slots 1 2 4] [--clock-scale 2] [--json PATH]
    python benchmarks/parallel_speedup.py --smoke   # CI: 4 trials, 1 and 2 slots, fast clock

Beside the table: the sweeper's own work per trial, by phase (`sweep.study.loop.work`, from
each sweep's summary), and the host's load before and after, since slots share the host's CPUs.

Every setting must launch and finish all eight trials ok (else its ratio compares different
work): exit 1 otherwise. The full form writes docs/results/parallel_speedup.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._common import (  # noqa: E402
    add_smoke_flag,
    output_path,
    write_json,
    write_results,
)
from harness.record.layout import ResultsLayout  # noqa: E402
from harness.server.procs import free_port  # noqa: E402
from sweep.study.loop.work import PHASES  # noqa: E402

# Eight configurations distinct in the speculative knobs (steps, topk, draft tokens), at one
# memory setting: the sweep holds the memory knobs at the first started trial's (search.memory
# auto), so configurations that differ only there are duplicates it never launches, and the
# sampler's own proposals (screened with one run) would take their places.
CONFIGS = [(1, 1, 2), (2, 1, 3), (3, 1, 4), (4, 1, 5), (5, 1, 6), (2, 2, 4), (3, 2, 6), (4, 2, 8)]
SMOKE_CONFIGS = 4  # the smoke form's trials: the first four


def enqueue(configs: list[tuple[int, int, int]]) -> str:
    items = [
        f"{{speculative_num_steps:{s},speculative_eagle_topk:{k},speculative_num_draft_tokens:"
        f"{d},mem_fraction_static:0.8,hicache_size:0}}"
        for s, k, d in configs
    ]
    return "search.enqueue=[" + ",".join(items) + "]"


def measure(slots: int, clock_scale: float, port: int, configs: list) -> dict:
    with TemporaryDirectory() as tmp:
        argv = [
            *(sys.executable, "sweep.py", "-m", "experiment=single_gpu", "hardware.gpus=4"),
            f"worker.slots={slots}",
            f"worker.lock_dir={tmp}/locks",
            f"tracking.dir={tmp}",
            f"server.port={port}",
            f"search.n_trials={len(configs)}",
            enqueue(configs),
            *("search.baseline=false", "search.prune=false", "search.remeasure_baseline=false"),
            *("benchmark.runs=2", "benchmark.warmup=1", "benchmark.requests_per_run=1"),
            *("benchmark.max_tokens=512", f"engine.clock_scale={clock_scale}", "preflight=false"),
            "report=false",  # the HTML report is not what is timed, and costs each sweep seconds
        ]
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        total = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"sweep with {slots} slot(s) failed:\n{proc.stdout[-3000:]}")
        summary = json.loads(ResultsLayout.at(tmp).summaries()[-1].read_text())
    metrics = summary["metrics"]
    launched = metrics["n_launched"]
    ok = sum(t["outcome"] == "ok" for t in summary["trials"])
    # the sweeper's own work per trial, by phase (sweep.study.loop.work): wall and CPU seconds
    work = {
        p: (
            round(metrics[f"sweeper_{p}_wall_s"] / launched, 3),
            round(metrics[f"sweeper_{p}_cpu_s"] / launched, 3),
        )
        for p in PHASES
    }
    return {
        "slots": slots,
        "wall_s": round(metrics["trials_wall_s"], 2),
        "process_wall_s": round(total, 2),
        "launched": int(launched),
        "ok": ok,
        "sweeper_per_trial": work,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--clock-scale", type=float, default=2.0)
    parser.add_argument(
        "--port", type=int, default=None, help="the servers' port (default: a free one)"
    )
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/parallel_speedup.json")
    add_smoke_flag(parser)
    args = parser.parse_args()
    configs = CONFIGS[:SMOKE_CONFIGS] if args.smoke else CONFIGS
    if args.smoke:
        args.slots, args.clock_scale = [1, 2], 50.0
    port = args.port or free_port()
    host_load = (f"{os.getloadavg()[0]:.2f}",)  # the host is what slots share: said beside
    rows = [measure(s, args.clock_scale, port, configs) for s in args.slots]
    base = next(r["wall_s"] for r in rows if r["slots"] == min(args.slots))
    for row in rows:
        row["speedup"] = round(base / row["wall_s"], 2)
    table = Table(title=f"GPU slots: {len(configs)} trials, wall time vs one slot (SIMULATED)")
    for column in ("slots", "trials wall s", "process wall s", "launched", "ok", "speedup"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["slots"]),
            f"{r['wall_s']:.1f}",
            f"{r['process_wall_s']:.1f}",
            str(r["launched"]),
            str(r["ok"]),
            f"{r['speedup']:.2f}x",
        )
    work = Table(
        title="The sweeper's own work per trial, besides its server: wall s / CPU s (SIMULATED)"
    )
    work.add_column("slots", justify="right")
    for phase in (*PHASES, "total"):
        work.add_column(phase, justify="right")
    for r in rows:
        phases = r["sweeper_per_trial"]
        wall = sum(w for w, _ in phases.values())
        cpu = sum(c for _, c in phases.values())
        cells = [f"{w:.2f} / {c:.2f}" for w, c in phases.values()]
        work.add_row(str(r["slots"]), *cells, f"{wall:.2f} / {cpu:.2f}")
    out = Console(width=max(Console().width, 120))
    out.print(table)
    out.print(work)
    report = {
        "simulated": True,
        "profile": "llama31_8b on h100_sxm (experiment=single_gpu, hardware.gpus=4)",
        "trials": len(configs),
        "clock_scale": args.clock_scale,
        "slots": rows,
        "host_load_1min": {"before": float(host_load[0]), "after": round(os.getloadavg()[0], 2)},
    }
    write_json(output_path(args.json, args.smoke), report, "parallel_speedup")
    note = (
        f"{len(configs)} trials per setting, clock scale {args.clock_scale:g}; {report['profile']}."
    )
    phases = (
        "Sweeper work per trial: the sweeper process's own phases (sweep/study/loop/work.py), "
        "wall seconds (waits for the GIL and the sqlite stores included) / that thread's CPU "
        "seconds, summed over the trials and divided by the trials launched. ask: Optuna's ask; "
        "decide: the job composed, its candidate, verdict and claim; forecast: the model's "
        "prediction; log: the MLflow run; tell: Optuna told, the claim released, the line "
        "printed; stop: the stopping rules. Host load (uptime) before and after: "
        f"{host_load[0]} / {os.getloadavg()[0]:.2f}."
    )
    write_results(
        "parallel_speedup", [table, work], simulated=True, smoke=args.smoke, notes=(note, phases)
    )
    short = [r for r in rows if r["launched"] != len(configs) or r["ok"] != len(configs)]
    if short:
        raise SystemExit(
            "settings that did not launch and finish every trial ok: "
            + ", ".join(
                f"{r['slots']} slot(s): {r['launched']} launched, {r['ok']} ok" for r in short
            )
        )


if __name__ == "__main__":
    main()
