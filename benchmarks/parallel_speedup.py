"""GPU slots: wall time of a fixed set of trials with 1, 2 and 4 slots (SIMULATED).

Runs `python sweep.py -m` on the simulator's single-GPU profile (Llama-3.1-8B, TP 1, on a
simulated 4x H100 box: `hardware.gpus=4`) with the same eight distinct configurations enqueued,
so every setting launches exactly eight servers; only `worker.slots` changes. The time is the
sweep's trials phase (`trials_wall_s` in its summary: from the first ask to the last tell), as a
ratio to one slot. The servers are simulators on a virtual clock: this measures how well the
sweeper overlaps trials, not GPU throughput.

    python benchmarks/parallel_speedup.py [--slots 1 2 4] [--clock-scale 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.record.layout import ResultsLayout  # noqa: E402

# Eight distinct configurations (topk 1: draft tokens follow the steps), all fit in memory.
CONFIGS = [(steps, mem) for steps in (1, 2, 3, 4) for mem in (0.7, 0.8)]


def enqueue() -> str:
    items = [
        f"{{speculative_num_steps:{s},speculative_eagle_topk:1,speculative_num_draft_tokens:"
        f"{s + 1},mem_fraction_static:{m},hicache_size:0}}"
        for s, m in CONFIGS
    ]
    return "search.enqueue=[" + ",".join(items) + "]"


def measure(slots: int, clock_scale: float, port: int) -> dict:
    with TemporaryDirectory() as tmp:
        argv = [
            *(sys.executable, "sweep.py", "-m", "experiment=single_gpu", "hardware.gpus=4"),
            f"worker.slots={slots}",
            f"worker.lock_dir={tmp}/locks",
            f"tracking.dir={tmp}",
            f"server.port={port}",
            f"search.n_trials={len(CONFIGS)}",
            enqueue(),
            *("search.baseline=false", "search.prune=false", "search.remeasure_baseline=false"),
            *("benchmark.runs=2", "benchmark.warmup=1", "benchmark.requests_per_run=1"),
            *("benchmark.max_tokens=512", f"engine.clock_scale={clock_scale}", "preflight=false"),
        ]
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        total = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"sweep with {slots} slot(s) failed:\n{proc.stdout[-3000:]}")
        summary = json.loads(ResultsLayout.at(tmp).summaries()[-1].read_text())
    launched = summary["metrics"]["n_launched"]
    ok = sum(t["outcome"] == "ok" for t in summary["trials"])
    return {
        "slots": slots,
        "wall_s": round(summary["metrics"]["trials_wall_s"], 2),
        "process_wall_s": round(total, 2),
        "launched": int(launched),
        "ok": ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--clock-scale", type=float, default=2.0)
    parser.add_argument("--port", type=int, default=34100)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/parallel_speedup.json")
    args = parser.parse_args()
    rows = [measure(s, args.clock_scale, args.port) for s in args.slots]
    base = next(r["wall_s"] for r in rows if r["slots"] == min(args.slots))
    for row in rows:
        row["speedup"] = round(base / row["wall_s"], 2)
    table = Table(title=f"GPU slots: {len(CONFIGS)} trials, wall time vs one slot (SIMULATED)")
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
    Console(width=max(Console().width, 100)).print(table)
    report = {
        "simulated": True,
        "profile": "llama31_8b on h100_sxm (experiment=single_gpu, hardware.gpus=4)",
        "trials": len(CONFIGS),
        "clock_scale": args.clock_scale,
        "slots": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
