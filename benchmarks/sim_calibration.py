"""Seed figures vs the simulator, fit and held-out apart (SIMULATED numbers).

Every measured figure the simulator is compared with has a role (`benchmarks/_calibration.py`):
fit (a constant was solved from it), held-out (no constant saw it: gated within 10%, the seeds'
own run-to-run spread), known error (held out, missed for a stated reason, shown) or unused. Two
tables:

- the model, in-process: every figure with the model's prediction for its workload;
- served: each seed configuration with a launch is started with specsweep's command builder and
  `Server` and benchmarked by specsweep's client as the seeds' script ran it (single stream,
  reasoning prompts, max_tokens 1,024, 2 warm-ups, 5 runs of 3 requests): the fit rows check that
  the served simulator is the model (within 5%), the held-out rows are gated as above.

The seeds' EAGLE rows (4-9) ran SGLang's EAGLE worker without the overlap scheduler, so those rows
pass --disable-overlap-schedule. The memory table's three launches report their outcome and
SGLang's `max_total_num_tokens`. The data-generation rows (seed-figures.md, "Throughput under
load") run on the steady-state oracle (benchmarks/_datagen.py).

    python benchmarks/sim_calibration.py [--clock-scale 25] [--json PATH] [--datagen-only]
    python benchmarks/sim_calibration.py --fit     # refit every constant from its figures
    python benchmarks/sim_calibration.py --smoke   # CI: every model and data-generation row, one
                                                   # served row and two memory launches

The full form writes docs/results/sim_calibration.md (its four tables).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._calibration import (  # noqa: E402
    FIGURES,
    FIT_TOL,
    HELD_OUT_TOL,
    SEEDS_SCRIPT,
    figure,
    fit,
    shipped,
)
from benchmarks._calibration import PCIE as PCIE_BOX  # noqa: E402
from benchmarks._common import (  # noqa: E402
    add_smoke_flag,
    output_path,
    write_json,
    write_results,
)
from benchmarks._datagen import datagen, datagen_failures, datagen_table  # noqa: E402
from harness.errors import ServerOOM  # noqa: E402
from harness.measure.bench import Benchmark  # noqa: E402
from harness.measure.clock import ServerClock  # noqa: E402
from harness.server.command import build_server_command  # noqa: E402
from harness.server.process import Server  # noqa: E402
from harness.server.procs import free_port  # noqa: E402
from harness.spec import BenchmarkSpec, EngineSpec, ServerSpec  # noqa: E402

NCCL = (("NCCL_PROTO", "LL"), ("NCCL_ALGO", "Ring"), ("NCCL_P2P_LEVEL", "SYS"))
KIMI = dict(
    model_path="moonshotai/Kimi-K2.5",
    tp_size=8,
    trust_remote_code=True,
    reasoning_parser="kimi_k2",
    env=NCCL,
)
# The seeds ran --mem-fraction-static 0.85 (their memory table); SGLang 0.5.23's default on this
# box (~0.76) leaves Kimi-K2.5's weights no KV room (docs/simulator.md, "mem_fraction_static when
# unset"), so every served seed row states it.
SEED = {**KIMI, "mem_fraction_static": 0.85}
LLAMA = dict(model_path="meta-llama/Llama-3.1-8B-Instruct", tp_size=1)
PCIE = ("--sim-hardware", "rtx_pro_6000_pcie", "--sim-target", "kimi_k25")
H100 = ("--sim-hardware", "h100_sxm", "--sim-target", "llama31_8b")


def eagle3(steps: int, topk: int, draft: int, drafter: str, **more) -> dict:
    return dict(
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path=f"/models/{drafter}",
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        **more,
    )


@dataclass(frozen=True)
class Row:
    """A seed configuration served: `figure` (its tok/s, when the figure is one) and `accept` are
    keys of _calibration.FIGURES."""

    figure: str
    server: dict
    sim: tuple[str, ...]
    drafter: str | None = None
    accept: str | None = None
    # Relative clock scale: the 8B profile streams ~2x the tokens per simulated second, so it
    # runs slower on the wall clock to keep the client and server ahead on 2 cores.
    clock_factor: float = 1.0


NO_OVERLAP = {"disable_overlap_schedule": True}
ROWS = [
    Row("row 2", SEED, PCIE),
    Row("row 4", {**SEED, **eagle3(3, 2, 5, "eagle3_10k", **NO_OVERLAP),
                  "disable_cuda_graph": True}, PCIE, "eagle3_10k"),
    Row("row 5", {**SEED, **eagle3(3, 2, 5, "aq_medai_k2", **NO_OVERLAP),
                  "disable_cuda_graph": True}, PCIE, "aq_medai_k2"),
    Row("row 6", {**SEED, **eagle3(4, 4, 16, "eagle3_10k", **NO_OVERLAP)}, PCIE, "eagle3_10k"),
    Row("row 7", {**SEED, **eagle3(3, 2, 5, "eagle3_10k", **NO_OVERLAP)}, PCIE, "eagle3_10k",
        "row 7 accept"),
    Row("row 8", {**SEED, **eagle3(2, 2, 5, "eagle3_10k", **NO_OVERLAP)}, PCIE, "eagle3_10k",
        "row 8 accept"),
    Row("row 13", {**SEED, **eagle3(3, 1, 4, "eagle3_37k_ttt5"),
                   "speculative_algorithm": "EAGLE"}, PCIE, "eagle3_37k_ttt5", "row 13"),
    Row("paper table 4 baseline", LLAMA, H100, clock_factor=0.4),
    Row("paper table 4 EAGLE-3", {**LLAMA, **eagle3(5, 8, 32, "eagle3_llama31_8b", **NO_OVERLAP)},
        H100, "eagle3_llama31_8b", clock_factor=0.4),
]  # fmt: skip
# The seeds' memory table: mem_fraction_static, hicache_size, outcome, max_total_num_tokens, and
# what each fits (profiles.py: the target's weights, the drafter's KV cell, activation_mib's range).
MEMORY = [
    (0.85, 0, "ok", 116_171, "fit: kimi_k25.weights_mib_total"),
    (0.88, 48, "ok", 159_277, "fit: the draft KV per token"),
    (0.93, 0, "oom", None, "fit: activation_mib's upper bound (0.88 starts: its lower)"),
]
SEED_RANKING = ["row 2", "row 7", "row 8", "row 6", "row 4"]
SERVED_FIT_TOL = 0.05  # a fit row served: the simulator against its own model, run noise


def engine(scale: float, sim: tuple[str, ...], drafter: str | None) -> EngineSpec:
    extra = ["--sim-clock-scale", str(scale), "--sim-seed", "0", *sim]
    if drafter:
        extra += ["--sim-drafter", drafter]
    return EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        ready_timeout_s=120,
        stop_grace_s=10,
        extra_args=tuple(extra),
    )


def measure(row: Row, scale: float, folder: Path) -> list[dict]:
    spec = ServerSpec(port=free_port(), enable_metrics=True, **row.server)
    command = build_server_command(spec, engine(scale * row.clock_factor, row.sim, row.drafter))
    bench_spec = BenchmarkSpec(
        model=spec.model_path, max_tokens=SEEDS_SCRIPT.output, warmup=2, runs=5,
        requests_per_run=3,
    )  # fmt: skip
    log = folder / f"{len(list(folder.iterdir()))}.log"
    with Server(command, log, ready_timeout_s=120) as server:
        server.wait_ready()
        clock = ServerClock.from_server_info(server.server_info())
        result = Benchmark(
            command.base_url,
            bench_spec,
            clock,
            speculative=spec.speculative,
            server_log=log,
            check_server=lambda: server.raise_if_exited(during="the benchmark"),
        ).run()
    out = []
    if figure(row.figure).unit == "tok/s":  # row 13's figure is its accept length alone
        out.append(_served(figure(row.figure), result.metrics["tok_s"],
                           result.metrics.get("tok_s_ci95", 0.0)))  # fmt: skip
    if row.accept and "accept_len" in result.metrics:
        out.append(_served(figure(row.accept), result.metrics["accept_len"], 0.0))
    return out


def _served(f, value: float, ci95: float) -> dict:
    return {"figure": f.key, "what": f.what, "role": f.role, "seed": f.value, "seed_high": f.high,
            "unit": f.unit, "sim": round(value, 3), "sim_ci95": round(ci95, 2),
            "miss": round(f.miss_of(value), 4)}  # fmt: skip


def _served_failures(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        tol = SERVED_FIT_TOL if r["role"] == "fit" else HELD_OUT_TOL
        if r["role"] in ("fit", "held-out") and abs(r["miss"]) > tol:
            out.append(f"served {r['figure']} ({r['role']}): {r['miss']:+.1%}")
    return out


def model_rows(c) -> list[dict]:
    """Every figure with the model's prediction (in-process), in the order fit, held-out, known
    error, unused."""
    out = []
    for role in ("fit", "held-out", "known error", "unused"):
        for f in FIGURES:
            if f.role != role:
                continue
            value = f.model(c)
            out.append({"figure": f.key, "box": f.box, "what": f.what, "role": role,
                        "fits": f.fits, "seed": f.value, "seed_high": f.high, "unit": f.unit,
                        "model": None if value is None else round(value, 4),
                        "miss": None if value is None else round(f.miss(c), 4),
                        "note": f.note})  # fmt: skip
    return out


def _model_failures(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["miss"] is None:
            continue
        if r["role"] == "held-out" and abs(r["miss"]) > HELD_OUT_TOL:
            out.append(f"held-out {r['figure']}: {r['miss']:+.1%}")
        if r["role"] == "fit" and abs(r["miss"]) > FIT_TOL:
            out.append(f"fit {r['figure']} not met: {r['miss']:+.1%} (run --fit)")
    return out


def _seed(r: dict) -> str:
    v = f"{r['seed']:.3g}" if r["unit"] in ("x", "accept") else f"{r['seed']:,.2f}".rstrip("0")
    return v.rstrip(".") + (f"-{r['seed_high']:.3g}" if r["seed_high"] else "")


def model_table(rows: list[dict]) -> Table:
    table = Table(title="Every figure against the model, in-process (SIMULATED)")
    for col in ("role", "figure", "box", "seed", "model", "miss", "fits / note"):
        table.add_column(col, justify="right" if col in ("seed", "model", "miss") else "left")
    for r in rows:
        miss = "-" if r["miss"] is None else f"{r['miss']:+.1%}"
        if r["role"] == "held-out" and r["miss"] is not None:
            miss += " ok" if abs(r["miss"]) <= HELD_OUT_TOL else " OUT"
        model = "-" if r["model"] is None else f"{r['model']:.3g}"
        table.add_row(r["role"], r["figure"], r["box"].split("_")[0], _seed(r), model, miss,
                      r["fits"] or r["note"])  # fmt: skip
    return table


def served_table(rows: list[dict]) -> Table:
    table = Table(title="Seed configurations served through the real harness (SIMULATED)")
    for col in ("role", "figure", "seed", "sim ±95%", "miss"):
        table.add_column(col, justify="left" if col in ("role", "figure") else "right")
    for r in sorted(rows, key=lambda r: r["role"] != "fit"):
        tol = SERVED_FIT_TOL if r["role"] == "fit" else HELD_OUT_TOL
        mark = " ok" if abs(r["miss"]) <= tol else " OUT"
        table.add_row(r["role"], r["figure"], _seed(r), f"{r['sim']:.3g} ± {r['sim_ci95']:.1f}",
                      f"{r['miss']:+.1%}{mark}")  # fmt: skip
    return table


def memory(mem: float, hicache: int, scale: float, folder: Path) -> dict:
    spec = ServerSpec(
        port=free_port(), mem_fraction_static=mem, hicache_size=hicache, **KIMI,
        **eagle3(3, 1, 4, "eagle3_37k_ttt5"),
    )  # fmt: skip
    command = build_server_command(spec, engine(scale, PCIE, "eagle3_37k_ttt5"))
    outcome, tokens = "ok", None
    with Server(command, folder / f"mem-{mem}-{hicache}.log", ready_timeout_s=120) as server:
        try:
            server.wait_ready()
            tokens = server.server_info()["max_total_num_tokens"]
        except ServerOOM:
            outcome = "oom"
    return {"mem_fraction_static": mem, "hicache_size": hicache, "sim_outcome": outcome,
            "sim_max_total_num_tokens": tokens}  # fmt: skip


def refit(console: Console) -> int:
    console.print("Refitting every constant from its fit figures (a few minutes) ...")
    shipped_c = shipped()
    fitted = fit(shipped_c, say=console.print)
    table = Table(title="Fitted constants: shipped vs refitted")
    for col in ("constant", "fitted to", "shipped", "refitted", "diff"):
        table.add_column(col, justify="left" if col in ("constant", "fitted to") else "right")
    fits = {f.fits: f.key for f in FIGURES if f.fits}
    fits[f"{PCIE_BOX}.attention_efficiency"] = "datagen 0.88"
    drift = []
    for dotted, key in fits.items():
        name, field = dotted.split(".")
        old, new = getattr(shipped_c[name], field), getattr(fitted[name], field)
        diff = new / old - 1
        drift += [dotted] if abs(diff) > 0.01 else []
        table.add_row(dotted, key, f"{old:.4g}", f"{new:.4g}", f"{diff:+.2%}")
    console.print(table)
    console.print("shipped = refitted (within 1%)" if not drift else f"REFIT DIFFERS: {drift}")
    return 1 if drift else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clock-scale",
        type=float,
        default=25.0,
        help="simulated seconds per wall second (lower on a busy machine: it must keep up)",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/sim_calibration.json")
    parser.add_argument(
        "--datagen-only", action="store_true", help="only the data-generation rows (seconds)"
    )
    parser.add_argument(
        "--fit", action="store_true", help="refit the constants from the fit figures and compare"
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    # the smoke form serves the first seed row (its fit) and launches the memory table's first
    # and last rows (one that starts, one that runs out of memory), at a faster clock
    rows, memory_rows = (ROWS[:1], MEMORY[::2]) if args.smoke else (ROWS, MEMORY)
    scale = 2 * args.clock_scale if args.smoke else args.clock_scale
    console = Console(width=max(Console().width, 120))
    if args.fit:
        return refit(console)
    console.print("  data generation rows (oracle) ...")
    datagen_rows = datagen()
    console.print(datagen_table(datagen_rows))
    if args.datagen_only:
        failures = datagen_failures(datagen_rows)
        console.print("all within bounds" if not failures else f"OUT OF BOUNDS: {failures}")
        return 1 if failures else 0
    figures = model_rows(shipped())
    console.print(model_table(figures))
    served, mem_rows = [], []
    with TemporaryDirectory() as tmp:
        for row in rows:
            console.print(f"  serving {row.figure} ...")
            served += measure(row, scale, Path(tmp))
        for mem, hicache, seed_outcome, seed_tokens, role in memory_rows:
            result = memory(mem, hicache, scale, Path(tmp))
            mem_rows.append({**result, "seed_outcome": seed_outcome, "role": role,
                             "seed_max_total_num_tokens": seed_tokens})  # fmt: skip
    console.print(served_table(served))
    failures = datagen_failures(datagen_rows) + _model_failures(figures) + _served_failures(served)
    mem_table = Table(title="Memory table (SIMULATED; every row fits a constant)")
    for col in ("mem_fraction_static", "hicache", "seed", "sim", "seed tokens", "sim tokens",
                "fits"):  # fmt: skip
        mem_table.add_column(col, justify="left" if col == "fits" else "right")
    for m in mem_rows:
        mem_table.add_row(
            str(m["mem_fraction_static"]), str(m["hicache_size"]), m["seed_outcome"],
            m["sim_outcome"], f"{m['seed_max_total_num_tokens'] or '-'}",
            f"{m['sim_max_total_num_tokens'] or '-'}", m["role"],
        )  # fmt: skip
        if m["seed_outcome"] != m["sim_outcome"]:
            failures.append(f"memory {m['mem_fraction_static']}: {m['sim_outcome']}")
        seed_tokens, sim_tokens = m["seed_max_total_num_tokens"], m["sim_max_total_num_tokens"]
        if seed_tokens and sim_tokens and abs(sim_tokens / seed_tokens - 1) > 0.01:
            failures.append(f"memory {m['mem_fraction_static']}: {sim_tokens} tokens")
    console.print(mem_table)
    by_key = {r["figure"]: r["sim"] for r in served}
    if all(name in by_key for name in SEED_RANKING):  # the smoke form serves one row
        ranking = sorted(SEED_RANKING, key=lambda n: -by_key[n])
        console.print(f"seed ranking {' > '.join(SEED_RANKING)}; simulated {' > '.join(ranking)}")
        if ranking != SEED_RANKING:
            failures.append("ranking differs")
    report = {"figures": figures, "served": served, "memory": mem_rows, "datagen": datagen_rows,
              "failures": failures, "held_out_tolerance": HELD_OUT_TOL}  # fmt: skip
    write_json(output_path(args.json, args.smoke), report, "sim_calibration")
    held = [r for r in figures + served if r["role"] == "held-out" and r["miss"] is not None]
    inside = sum(abs(r["miss"]) <= HELD_OUT_TOL for r in held)
    console.print(f"held-out: {inside} of {len(held)} within {HELD_OUT_TOL:.0%} (model and served)")
    verdict = "all within bounds" if not failures else f"OUT OF BOUNDS: {failures}"
    console.print(verdict)
    tables = [datagen_table(datagen_rows), model_table(figures), served_table(served), mem_table]
    notes = (f"held-out: {inside} of {len(held)} within {HELD_OUT_TOL:.0%} (model and served); "
             f"{verdict}",)  # fmt: skip
    write_results("sim_calibration", tables, simulated=True, smoke=args.smoke, notes=notes)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
