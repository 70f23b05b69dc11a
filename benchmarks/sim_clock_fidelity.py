"""How fast can the simulator's clock run before CPU overhead distorts what the harness measures?

Runs the same benchmark against the simulator at several clock scales, side by side in one run,
and reports each scale's measured tok/s, TTFT p50/p99 and ITL p50/p99 as ratios to the slowest
scale (default 1: wall time, as real SGLang runs; per-token CPU work and the client's own few
milliseconds are then what they are on a real server). The quickstart's default
(engine.clock_scale) should sit where every ratio is still within 5% of 1.00: the latencies hold
because the simulator stamps each chunk with its virtual time and the client's own share stays
at wall rate (harness.measure.clock.restamp, docs/benchmark.md).

    python benchmarks/sim_clock_fidelity.py [--scales 1 10 50 200] [--max-tokens 1024] [--json]
        [--runs 3] [--requests 2]   (runs x requests measured requests per config and scale: ITL
        p99 at clock scale 1 is noisy on a busy machine, 30 or more make the comparison mean it)
    python benchmarks/sim_clock_fidelity.py --smoke   # CI: scales 10 and 50, short outputs

Every configuration must be measured at every scale with tokens streamed (exit 1 otherwise); the
ratios are reported, not gated: on a shared machine they are the machine's as much as the
simulator's. The full form writes docs/results/sim_clock_fidelity.md.
"""

from __future__ import annotations

import argparse
import json
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
from harness.measure.bench import Benchmark  # noqa: E402
from harness.measure.clock import ServerClock  # noqa: E402
from harness.server.command import build_server_command  # noqa: E402
from harness.server.process import Server  # noqa: E402
from harness.server.procs import free_port  # noqa: E402
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec  # noqa: E402

CONFIGS = {
    "baseline": {},
    "eagle3 3/1/4": dict(
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/eagle3",
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
    ),
}


LATENCIES = ("ttft_ms_p50_c1", "ttft_ms_p99_c1", "itl_ms_p50_c1", "itl_ms_p99_c1")


def measure(
    scale: float, fields: dict, max_tokens: int, folder: Path, runs: int = 3, requests: int = 2
) -> tuple[dict[str, float], float]:
    engine = EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        ready_timeout_s=120,
        # No drift: the scales compare the clock, not the machine's wander.
        extra_args=(
            "--sim-clock-scale",
            str(scale),
            "--sim-drafter",
            "eagle3_37k_ttt5",
            "--sim-drift",
            "0",
            "--sim-load-s",  # start-up is not what is compared: quick at clock scale 1
            str(2 * scale),
        ),
    )
    spec = ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        port=free_port(),
        reasoning_parser="kimi_k2",
        mem_fraction_static=0.85,
        env=(("NCCL_PROTO", "LL"),),
        **fields,
    )
    cmd = build_server_command(spec, engine)
    started = time.monotonic()
    with Server(cmd, folder / f"{scale}-{len(fields)}.log", ready_timeout_s=120) as server:
        server.wait_ready()
        clock = ServerClock.from_server_info(server.server_info())
        bench_spec = BenchmarkSpec(
            model="m", max_tokens=max_tokens, warmup=1, runs=runs, requests_per_run=requests
        )
        metrics = Benchmark(cmd.base_url, bench_spec, clock, speculative=bool(fields)).run().metrics
    return metrics, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1, 10, 50, 200])
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/sim_clock_fidelity.json")
    parser.add_argument("--json", action="store_true", help="print the JSON on stdout too")
    parser.add_argument("--runs", type=int, default=3, help="measured runs per config and scale")
    parser.add_argument("--requests", type=int, default=2, help="measured requests per run")
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.scales, args.max_tokens, args.runs, args.requests = [10, 50], 128, 1, 1
    scales = sorted(args.scales)
    rows = []
    with TemporaryDirectory() as tmp:
        for name, fields in CONFIGS.items():
            reference: dict[str, float] | None = None
            for scale in scales:
                metrics, wall_s = measure(
                    scale, fields, args.max_tokens, Path(tmp), args.runs, args.requests
                )
                reference = reference or metrics
                row = {"config": name, "clock_scale": scale, "tok_s": round(metrics["tok_s"], 2)}
                row.update({key: round(metrics[key], 2) for key in LATENCIES})
                row["ratio"] = {
                    key: round(metrics[key] / reference[key], 4) for key in ("tok_s", *LATENCIES)
                }
                row["wall_s"] = round(wall_s, 2)
                rows.append(row)
    table = Table(title=f"Simulator clock fidelity (ratio to clock scale {scales[0]:g})")
    columns = ("config", "clock scale", "tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms")
    for column in (*columns, "ITL p99 ms", "worst ratio", "wall s"):
        table.add_column(column, justify="left" if column == "config" else "right")
    for r in rows:
        worst = max(r["ratio"].values(), key=lambda v: abs(v - 1))
        table.add_row(
            r["config"],
            f"{r['clock_scale']:g}",
            f"{r['tok_s']:.1f}",
            *(f"{r[key]:.1f} ({r['ratio'][key]:.3f})" for key in LATENCIES),
            f"{worst:.3f}",
            f"{r['wall_s']:.1f}",
        )
    Console(width=max(Console().width, 120)).print(table)
    sizes = {"runs": args.runs, "requests_per_run": args.requests}
    report = {"max_tokens": args.max_tokens, **sizes, "rows": rows}
    write_json(output_path(args.out, args.smoke), report, "sim_clock_fidelity")
    if args.json:
        print(json.dumps(report, indent=2))
    note = f"max_tokens {args.max_tokens}, {args.runs} runs x {args.requests} requests per cell."
    write_results("sim_clock_fidelity", [table], simulated=True, smoke=args.smoke, notes=(note,))
    missing = [f"{r['config']} @ {r['clock_scale']:g}" for r in rows if not r["tok_s"] > 0]
    if len(rows) != len(CONFIGS) * len(scales) or missing:
        raise SystemExit(f"not measured: {', '.join(missing) or 'a configuration or scale'}")


if __name__ == "__main__":
    main()
