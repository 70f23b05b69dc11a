"""How fast can the simulator's clock run before CPU overhead distorts what the harness measures?

Runs the same benchmark against the simulator at several clock scales, side by side in one run,
and reports each scale's measured tok/s as a ratio to the slowest scale (where per-token CPU
work is negligible against the simulated step time). The quickstart's default (engine.clock_scale)
should sit where the ratio is still ~1.00.

    python benchmarks/sim_clock_fidelity.py [--scales 10 25 50 100 200] [--max-tokens 1024]
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

from harness.bench import Benchmark  # noqa: E402
from harness.clock import ServerClock  # noqa: E402
from harness.command import build_server_command  # noqa: E402
from harness.procs import free_port  # noqa: E402
from harness.server import Server  # noqa: E402
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


def measure(scale: float, fields: dict, max_tokens: int, folder: Path) -> tuple[float, float]:
    engine = EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        ready_timeout_s=120,
        extra_args=("--sim-clock-scale", str(scale), "--sim-drafter", "eagle3_37k_ttt5"),
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
            model="m", max_tokens=max_tokens, warmup=1, runs=3, requests_per_run=2
        )
        metrics = Benchmark(cmd.base_url, bench_spec, clock, speculative=bool(fields)).run().metrics
    return metrics["tok_s"], time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[10, 25, 50, 100, 200])
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/sim_clock_fidelity.json")
    args = parser.parse_args()
    scales = sorted(args.scales)
    rows = []
    with TemporaryDirectory() as tmp:
        for name, fields in CONFIGS.items():
            reference = None
            for scale in scales:
                tok_s, wall_s = measure(scale, fields, args.max_tokens, Path(tmp))
                reference = reference or tok_s
                rows.append(
                    {
                        "config": name,
                        "clock_scale": scale,
                        "tok_s": round(tok_s, 2),
                        "ratio_to_slowest_scale": round(tok_s / reference, 4),
                        "wall_s": round(wall_s, 2),
                    }
                )
    table = Table(title=f"Simulator clock fidelity (ratio to clock scale {scales[0]:g})")
    for column in ("config", "clock scale", "tok/s (simulated)", "ratio", "wall s"):
        table.add_column(column, justify="left" if column == "config" else "right")
    for r in rows:
        table.add_row(
            r["config"],
            f"{r['clock_scale']:g}",
            f"{r['tok_s']:.1f}",
            f"{r['ratio_to_slowest_scale']:.3f}",
            f"{r['wall_s']:.1f}",
        )
    Console(width=max(Console().width, 120)).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"max_tokens": args.max_tokens, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
