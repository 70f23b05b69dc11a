"""Does the benchmark client measure what the server really does?

Against the simulator at known rates (steady machine, no drift; ignore_eos so every request
makes exactly max_tokens), measures aggregate output tok/s at concurrency 1, 8, 64 and 256 with
specsweep's client and compares each with the simulator's own engine run to completion on an
instant clock (`harness.sim.oracle.modelled_load`); also the client's CPU seconds per 1,000
streamed tokens. The clock scale drops as concurrency grows, so the server keeps up on 2 cores.
SGLang's bench_serving is measured beside it when installed (it needs SGLang's compat env).

    python benchmarks/client_fidelity.py [--max-tokens 512] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.bench import Benchmark  # noqa: E402
from harness.clock import ServerClock  # noqa: E402
from harness.command import build_server_command, server_flags  # noqa: E402
from harness.procs import free_port  # noqa: E402
from harness.prompts import load_prompts  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.sim.oracle import modelled_load  # noqa: E402
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec  # noqa: E402

# concurrency -> clock scale: slow enough that HTTP set-up between requests stays negligible on
# the server's clock, and that the server keeps up with the chunk rate at high concurrency.
LEVELS = {1: 1.0, 8: 2.0, 64: 2.0, 256: 1.0}
SIM_FLAGS = ("--sim-drift", "0", "--sim-seed", "0", "--sim-load-s", "5")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(concurrency: int, scale: float, max_tokens: int, folder: Path) -> dict:
    server = ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        port=free_port(),
        reasoning_parser="kimi_k2",
        env=(("NCCL_PROTO", "LL"),),
    )
    engine = EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        ready_timeout_s=300,
        extra_args=("--sim-clock-scale", str(scale), *SIM_FLAGS),
    )
    requests = max(4, concurrency)
    spec = BenchmarkSpec(
        model="m",
        max_tokens=max_tokens,
        warmup=0,
        runs=1,
        ignore_eos=True,
        concurrency=(concurrency,),
        requests_per_level=(requests,),
    )
    command = build_server_command(server, engine)
    with Server(command, folder / f"c{concurrency}.log", ready_timeout_s=300) as srv:
        srv.wait_ready()
        clock = ServerClock.from_server_info(srv.server_info())
        bench = Benchmark(command.base_url, spec, clock, speculative=False)
        before = cpu_seconds()
        result = bench.run()
        cpu = cpu_seconds() - before
    prompts = [p.messages[0]["content"] for p in load_prompts("builtin", 0, spec.categories)]
    argv = [*server_flags(server), *SIM_FLAGS]
    model = modelled_load(
        argv, concurrency, [prompts[i % len(prompts)] for i in range(requests)], max_tokens
    )
    measured = result.metrics[f"output_tok_s_c{concurrency}"]
    tokens = sum(r.completion_tokens or 0 for r in result.records)
    return {
        "concurrency": concurrency,
        "clock_scale": scale,
        "model_tok_s": round(model.output_tok_s, 2),
        "measured_tok_s": round(measured, 2),
        "rel_error": round(abs(measured - model.output_tok_s) / model.output_tok_s, 4),
        "client_cpu_s_per_1k_tokens": round(1000 * cpu / tokens, 4) if tokens else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/client_fidelity.json")
    args = parser.parse_args()
    with TemporaryDirectory() as tmp:
        levels = [measure(c, scale, args.max_tokens, Path(tmp)) for c, scale in LEVELS.items()]
    cpu = [lv["client_cpu_s_per_1k_tokens"] for lv in levels if lv["client_cpu_s_per_1k_tokens"]]
    report = {
        "levels": levels,
        "client_cpu_s_per_1k_tokens": round(sum(cpu) / len(cpu), 4),
        "max_tokens": args.max_tokens,
    }
    if importlib.util.find_spec("sglang") is None:
        report["bench_serving"] = "not installed: SGLang's bench_serving needs its own env"
    table = Table(title="Client fidelity: measured vs modelled aggregate output tok/s (simulated)")
    for column in (
        "concurrency",
        "clock scale",
        "modelled tok/s",
        "measured tok/s",
        "rel. error",
        "client CPU s / 1k tokens",
    ):
        table.add_column(column, justify="right")
    for lv in levels:
        table.add_row(
            str(lv["concurrency"]),
            f"{lv['clock_scale']:g}",
            f"{lv['model_tok_s']:.1f}",
            f"{lv['measured_tok_s']:.1f}",
            f"{100 * lv['rel_error']:.2f}%",
            f"{lv['client_cpu_s_per_1k_tokens']:.3f}",
        )
    Console(width=max(Console().width, 120)).print(table)
    if "bench_serving" in report:
        print(f"bench_serving: {report['bench_serving']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
