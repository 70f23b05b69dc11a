"""Does the benchmark client measure what the server really does, and keep up with it?

Against the simulator at known rates (steady machine, no drift; ignore_eos so every request
makes exactly max_tokens), measures aggregate output tok/s at concurrency 1, 8, 64 and 256 with
specsweep's client and compares each with the simulator's own engine on an instant clock fed the
same prompts in the same order: at C=1 the run to completion
(`harness.sim.oracle.modelled_load`), above 1 the same steady-state window (C requests kept in
flight, `window_at(C)` completions after C of ramp-up:
`harness.sim.oracle.modelled_steady_state`); also the client's CPU seconds per 1,000 streamed
tokens. On the same server, in the same run, SGLang's own `bench_serving` (`--backend sglang` on
/generate, the random-ids dataset, a word-level tokenizer it builds offline) measures the same load;
its throughput, TTFT, ITL and CPU per 1,000 tokens are printed beside ours, on the server's clock
(bench_serving knows no clock scale: its wall-clock numbers are converted). The clock scale drops as
concurrency grows, so the server keeps up on 2 cores.

bench_serving runs in SGLang's compat env (`make compat`: .venv-compat; --compat-python), through
benchmarks/_bench_serving_cpu.py, which times its benchmark coroutine alone (not SGLang's import).

    python benchmarks/client_fidelity.py [--max-tokens 512] [--json PATH] [--levels 1,8]
    python benchmarks/client_fidelity.py --smoke   # CI: concurrency 1 and 8, 64 tokens

Every level's measured tok/s must be within FIDELITY_TOL of the modelled one (the client reading
what the server does is this benchmark's point): exit 1 otherwise. CPU per token is reported, not
gated (it is the machine's as much as the client's). The full form writes
docs/results/client_fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
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
from harness.server.command import build_server_command, server_flags  # noqa: E402
from harness.server.process import Server  # noqa: E402
from harness.server.procs import free_port  # noqa: E402
from harness.sim.oracle import modelled_load, modelled_steady_state  # noqa: E402
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec  # noqa: E402

# concurrency -> clock scale: slow enough that HTTP set-up between requests stays negligible on
# the server's clock, and that the server keeps up with the chunk rate at high concurrency.
LEVELS = {1: 1.0, 8: 2.0, 64: 1.0, 256: 1.0}
# The client's CPU per token depends on how often chunks arrive, not only on how many: each
# wake-up of its event loop costs ~0.15 ms of CPU on this VM whatever it reads. So concurrency 1
# is measured once more at the sweep's default clock (engine.clock_scale 50: conf/engine/sim.yaml),
# the chunk rate every default sweep's runs stream at, beside the slow clock that keeps its
# latencies honest.
DEFAULT_CLOCK = 50.0
EXTRA_LEVELS = ((1, DEFAULT_CLOCK),)
SIM_FLAGS = ("--sim-drift", "0", "--sim-seed", "0", "--sim-load-s", "5")
# The seeds' fraction (conf/search reference): SGLang 0.5.23's own default (0.758 here) leaves
# Kimi-K2.5's weights no KV cache on the seeds' box, so the server would not start without one.
MEM_FRACTION = 0.85


INPUT_LEN = 64  # bench_serving's random prompts, in tokens of its tokenizer
# measured against modelled tok/s: docs/benchmark.md's full run missed by 0.03-1.16%; 5% leaves a
# busy CI machine room while a client that miscounts tokens or time misses by far more
FIDELITY_TOL = 0.05
SMOKE_LEVELS = "1@50,8"  # 8 at its own clock (LEVELS): faster, the client's wall time counts


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def bench_serving(
    python: Path, base_url: str, concurrency: int, requests: int, max_tokens: int, folder: Path
) -> dict:
    """SGLang's bench_serving against the running server: its result and its CPU time."""
    out, cpu_out = folder / f"bs{concurrency}.jsonl", folder / f"bs{concurrency}.cpu.json"
    argv = [
        *("--backend", "sglang", "--base-url", base_url, "--model", "m"),
        *("--dataset-name", "random-ids", "--random-input-len", str(INPUT_LEN)),
        *("--random-output-len", str(max_tokens), "--random-range-ratio", "1.0"),
        *("--num-prompts", str(requests), "--max-concurrency", str(concurrency)),
        *("--warmup-requests", "0", "--ready-check-timeout-sec", "0", "--disable-tqdm"),
        *("--seed", "0", "--output-file", str(out)),
    ]
    script = ROOT / "benchmarks" / "_bench_serving_cpu.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    before = cpu_seconds(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [str(python), str(script), str(cpu_out), str(folder / "tokenizer"), "--", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    process_cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - before
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"bench_serving failed: {(done.stdout + done.stderr)[-2000:]}")
    result = json.loads(out.read_text().splitlines()[-1])
    result["cpu"] = json.loads(cpu_out.read_text())
    result["process_cpu_s"] = process_cpu  # the whole subprocess: SGLang's import included
    return result


def measure(
    concurrency: int, scale: float, max_tokens: int, folder: Path, compat: Path | None
) -> dict:
    server = ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        mem_fraction_static=MEM_FRACTION,
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
    spec = spec_for(concurrency, max_tokens)
    requests = spec.requests_at(concurrency)  # the prompts the run sends: bench_serving's too
    command = build_server_command(server, engine)
    with Server(command, folder / f"c{concurrency}.log", ready_timeout_s=300) as srv:
        srv.wait_ready()
        clock = ServerClock.from_server_info(srv.server_info())
        bench = Benchmark(command.base_url, spec, clock, speculative=False)
        before = cpu_seconds()
        result = bench.run()
        cpu = cpu_seconds() - before
        # how far the simulator's engine trailed its clock over the run (harness.sim.clock.Lag)
        behind = srv.server_info().get("simulator", {}).get("behind_share")
        theirs = None
        if compat is not None:
            theirs = bench_serving(
                compat, command.base_url, concurrency, requests, max_tokens, folder
            )
    plan = bench.prompt_plan.source("measure", 1, concurrency)  # the run's prompts, in order
    count = requests + concurrency  # the model may start one more per slot before it stops
    prompts = ["\n".join(m["content"] for m in next(plan).messages) for _ in range(count)]
    argv = [*server_flags(server), *SIM_FLAGS]
    model = modelled(argv, spec, concurrency, prompts)
    measured = result.metrics[f"output_tok_s_c{concurrency}"]
    tokens = sum(r.completion_tokens or 0 for r in result.records)
    run = result.runs[-1]
    level = {
        "concurrency": concurrency,
        "clock_scale": scale,
        "model_tok_s": round(model.output_tok_s, 2),
        "measured_tok_s": round(measured, 2),
        "rel_error": round(abs(measured - model.output_tok_s) / model.output_tok_s, 4),
        "model": "steady_state" if concurrency > 1 else "run_to_completion",
        "requests": requests,
        "window_completions": run.window_completions,
        "sim_behind_share": behind,
        # the whole Benchmark.run (client set-up, flush, run): like bench_serving's benchmark()
        "client_cpu_s_per_1k_tokens": round(1000 * cpu / tokens, 4) if tokens else None,
        # the measured run alone (RunSummary, harness/measure/client_cpu.py): no client set-up, no
        # flush
        "run_client_cpu_s_per_1k_tokens": run.client_cpu_s_per_1k_tokens,
        "client_cpu_util": run.client_cpu_util,
        "ttft_ms": {k: round(1000 * v, 2) for k, v in run.ttft_p.items()},
        "itl_ms": {k: round(1000 * v, 3) for k, v in run.itl_p.items()},
    }
    if theirs is not None:
        level["bench_serving"] = on_server_clock(theirs, scale)
    return level


def spec_for(concurrency: int, max_tokens: int) -> BenchmarkSpec:
    """At C=1 a run of 4 requests; above 1 a steady-state run whose window holds max(C, 16)
    completions (after C of ramp-up; the C - 1 still running when it closes are cut)."""
    return BenchmarkSpec(
        model="m",
        max_tokens=max_tokens,
        warmup=0,
        runs=1,
        ignore_eos=True,
        concurrency=(concurrency,),
        requests_per_level=(4 if concurrency == 1 else max(concurrency, 16),),
    )


def modelled(argv: list[str], spec: BenchmarkSpec, concurrency: int, prompts: list[str]):
    """What a perfect client would measure for the run `spec` describes, `prompts` in sending
    order: at C=1 the run to completion, above 1 the same steady-state window."""
    if concurrency == 1:
        return modelled_load(argv, 1, prompts[: spec.requests_at(1)], spec.max_tokens)
    window = spec.window_at(concurrency)
    return modelled_steady_state(
        argv, concurrency, prompts, spec.max_tokens, window, ignore_eos=True
    )


def on_server_clock(theirs: dict, scale: float) -> dict:
    """bench_serving's numbers, converted from wall-clock to the server's clock."""
    tokens = theirs["total_output_tokens"]
    return {
        "output_tok_s": round(theirs["output_throughput"] / scale, 2),
        "ttft_ms": {p: round(theirs[f"{k}_ttft_ms"] * scale, 2) for p, k in PERCENTILES},
        "itl_ms": {p: round(theirs[f"{k}_itl_ms"] * scale, 3) for p, k in PERCENTILES},
        "completed": theirs["completed"],
        "client_cpu_s_per_1k_tokens": round(1000 * theirs["cpu"]["cpu_s"] / tokens, 4),
        "process_cpu_s_per_1k_tokens": round(1000 * theirs["process_cpu_s"] / tokens, 4),
    }


PERCENTILES = (("p50", "median"), ("p90", "p90"), ("p99", "p99"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/client_fidelity.json")
    default_levels = [str(c) for c in LEVELS] + [f"{c}@{k:g}" for c, k in EXTRA_LEVELS]
    parser.add_argument(
        "--levels",
        default=",".join(default_levels),
        help="concurrency[@clock scale], e.g. 1,8,1@50 (the clock defaults to the level's own)",
    )
    parser.add_argument(
        "--compat-python",
        type=Path,
        default=ROOT / ".venv-compat" / "bin" / "python",
        help="SGLang's compat env (make compat), for bench_serving",
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.levels, args.max_tokens = SMOKE_LEVELS, 64
    compat = args.compat_python if args.compat_python.is_file() else None
    chosen = [parse_level(level) for level in args.levels.split(",")]
    with TemporaryDirectory() as tmp:
        levels = [measure(c, scale, args.max_tokens, Path(tmp), compat) for c, scale in chosen]
    report = {"levels": levels, "max_tokens": args.max_tokens, **summary(levels)}
    if compat is None:
        report["bench_serving"] = f"not measured: no SGLang compat env at {args.compat_python}"
    Console(width=max(Console().width, 160)).print(table(levels))
    if "bench_serving" in report:
        print(f"bench_serving: {report['bench_serving']}")
    write_json(output_path(args.json, args.smoke), report, "client_fidelity")
    notes = [f"max_tokens {args.max_tokens}; clock = the simulator's clock scale per level."]
    if compat is None:
        notes.append(f"bench_serving: {report['bench_serving']}")
    tables = [table(levels)]
    write_results("client_fidelity", tables, simulated=True, smoke=args.smoke, notes=tuple(notes))
    off = [lv for lv in levels if lv["rel_error"] > FIDELITY_TOL]
    if off:
        raise SystemExit(
            f"measured tok/s off the modelled by more than {FIDELITY_TOL:.0%}: "
            + ", ".join(f"C={lv['concurrency']}: {lv['rel_error']:.1%}" for lv in off)
        )


def parse_level(text: str) -> tuple[int, float]:
    """ "8" -> (8, its clock in LEVELS); "1@50" -> (1, 50.0)."""
    concurrency, _, scale = text.strip().partition("@")
    if not scale and int(concurrency) not in LEVELS:
        raise SystemExit(f"--levels: no default clock for {concurrency}; write {concurrency}@SCALE")
    return int(concurrency), float(scale) if scale else LEVELS[int(concurrency)]


def summary(levels: list[dict]) -> dict:
    """The headline: the worst row's CPU per 1k tokens, ours and bench_serving's, over every row
    and over the rows at the sweep's default clock."""
    ours = [lv["client_cpu_s_per_1k_tokens"] for lv in levels if lv["client_cpu_s_per_1k_tokens"]]
    theirs = [
        lv["bench_serving"]["client_cpu_s_per_1k_tokens"] for lv in levels if "bench_serving" in lv
    ]
    out = {"client_cpu_s_per_1k_tokens": max(ours) if ours else None}
    at_default = [
        lv["client_cpu_s_per_1k_tokens"]
        for lv in levels
        if lv["clock_scale"] == DEFAULT_CLOCK and lv["client_cpu_s_per_1k_tokens"]
    ]
    if at_default:
        out["client_cpu_s_per_1k_tokens_at_default_clock"] = max(at_default)
    if theirs:
        out["bench_serving_cpu_s_per_1k_tokens"] = max(theirs)
        out["cpu_at_most_bench_serving"] = all(
            lv["client_cpu_s_per_1k_tokens"] <= lv["bench_serving"]["client_cpu_s_per_1k_tokens"]
            for lv in levels
            if "bench_serving" in lv
        )
    return out


def table(levels: list[dict]) -> Table:
    out = Table(title="Client fidelity (simulated; server clock): specsweep vs bench_serving")
    columns = (
        "C",
        "clock",
        "modelled tok/s",
        "ours tok/s",
        "rel. error",
        "bench_serving tok/s",
        "TTFT p50 ms ours / bs",
        "ITL p50 ms ours / bs",
        "ITL p99 ms ours / bs",
        "CPU s / 1k tok ours / bs",
    )
    for column in columns:
        out.add_column(column, justify="right")
    for lv in levels:
        bs = lv.get("bench_serving") or {}

        def pair(key: str, p: str, lv=lv, bs=bs) -> str:
            theirs = bs.get(key, {}).get(p)
            return f"{lv[key].get(p, float('nan')):.1f} / " + (
                f"{theirs:.1f}" if theirs is not None else "-"
            )

        cpu = bs.get("client_cpu_s_per_1k_tokens")
        out.add_row(
            str(lv["concurrency"]),
            f"{lv['clock_scale']:g}",
            f"{lv['model_tok_s']:.1f}",
            f"{lv['measured_tok_s']:.1f}",
            f"{100 * lv['rel_error']:.2f}%",
            f"{bs['output_tok_s']:.1f}" if bs else "-",
            pair("ttft_ms", "p50"),
            pair("itl_ms", "p50"),
            pair("itl_ms", "p99"),
            f"{lv['client_cpu_s_per_1k_tokens']:.3f} / " + (f"{cpu:.3f}" if cpu else "-"),
        )
    return out


if __name__ == "__main__":
    main()
