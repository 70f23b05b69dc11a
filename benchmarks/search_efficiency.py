"""How many GPU-hours (and server starts) does each search need to get within 2% of the optimum?

Runs whole searches in-process on the simulator's model (`_search_landscape`: the code the
simulator serves; `_search_sim`: each launch's simulated start-up and benchmark time, and runs
measured with the simulator's own drift and sampling noise) over the space
conf/search/eagle3_five.yaml. Every arm (`_search_arms`, which says what each is given) runs the
sweeper's own loop with the same memory policy, duplicate and predicted-OOM verdicts, early
stopping and budget; they differ in the sampler and in whether the priors are enqueued, and one
labelled row (`random-unshared`) is the earlier benchmark's random arm, given none of that.

Landscapes: `--profiles` the simulator's named boxes (8x RTX PRO 6000 PCIe and 8x H200 with
Kimi-K2.5, 1x H100 with Llama-3.1-8B), `--family [N]` N drawn deployments nobody tuned
(`_search_family`: the ranges and their sources), `--family-shapes [N]` the family's second part
(the same members with acceptance and cost shapes a model-based search does not assume, reported
as its own set, "family-shapes"); objectives `single` (single-stream tok/s) and
`multi` (weighted output throughput over concurrency 1, 8, 32, 64); `datagen` on request.
`--family-memory-tight [N]` the third part (the same members on cards their weights fill, so the
fraction decides how many requests the KV pool admits), searched under `multi` only and reported
as its own set, "family-memory-tight".
GPU-hours = (start-up + benchmark time) x the setup's GPUs, summed over launches; a duplicate or
predicted OOM costs nothing. Reached = a launched, completed trial whose true (noise-free) value
is within 2% of the optimum over the whole space; a search that never gets there within the
budget is censored (`_search_stats`). Medians over seeds with bootstrap 95% intervals. SIMULATED:
it compares search strategies on one model of the hardware, not the hardware.

    python benchmarks/search_efficiency.py [--profiles [LIST]] [--family [N]]
        [--family-shapes [N]] [--family-memory-tight [N]] [--seeds 50]
        [--objectives single,multi] [--arms LIST] [--drift 0.02] [--jobs 2] [--quick]
        [--json PATH]
    python benchmarks/search_efficiency.py --smoke              # CI: the whole path in seconds
    python benchmarks/search_efficiency.py --smoke --family-memory-tight  # its part (minutes)
    python benchmarks/search_efficiency.py --render-from JSON   # docs/results from a run's JSON
    python benchmarks/search_efficiency.py --render-from A.json B.json:family-memory-tight

A run writes docs/results/search_efficiency.md, its tables under the command, date and machine
that measured them; the full form (50 seeds, every set) takes hours here, so --render-from writes
the same file from the JSON such a run left, naming that run's command and date, or from several
runs, each set from one of them (`_search_runs`), the header naming which run gave which set.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
import warnings
from pathlib import Path

import optuna
from omegaconf import OmegaConf
from rich.markup import escape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _search_bar, _search_family, _search_report, _search_runs  # noqa: E402
from benchmarks._common import (  # noqa: E402
    add_smoke_flag,
    output_path,
    write_json,
    write_results,
)
from benchmarks._search_arms import (  # noqa: E402
    ARMS,
    BY_NAME,
    cheapest_within,
    grid_for,
    objective_for,
    run_arm,
    screen_price,
)
from benchmarks._search_landscape import (  # noqa: E402
    LEVELS,
    SETUPS,
    Landscape,
    Oracle,
)
from benchmarks._search_sim import SAMPLING_CV, Simulation  # noqa: E402
from harness.sglang.speculative import dominated_by  # noqa: E402
from harness.sim.model.drift import DRIFT_SIGMA, DRIFT_TIME_S  # noqa: E402
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace  # noqa: E402

SPACE_FILE = ROOT / "conf/search/eagle3_five.yaml"
DATAGEN_SPACE = {
    "mem_fraction_static": {"type": "float", "low": 0.82, "high": 0.94, "step": 0.01},
    "hicache_size": {"type": "categorical", "choices": [0, 48]},
}
# --smoke: specsweep's sampler, the model, and every arm the bar reads (`_search_bar`)
SMOKE_ARMS = "specsweep,model,model+priors,tpe,random,opening+clairvoyant,priors+clairvoyant"
DATAGEN_PRIOR = {"mem_fraction_static": 0.85, "hicache_size": 0}  # where the seeds started

# Filled before the worker processes fork (they inherit it): landscape -> (land, optimum, cfg)
_WORK: dict[str, tuple[Landscape, float, dict, list[dict]]] = {}
_NEAR: dict[str, float] = {}  # landscape -> share of the configurations that start within 2%
_CHEAPEST: dict[str, dict] = {}  # landscape -> the reference arms' answer (cheapest_within)
_SCREEN: dict[str, float] = {}  # landscape -> GPU-hours of one screen of that answer
_ARGS: argparse.Namespace | None = None


def all_points(space: SearchSpace) -> list[dict]:
    """Every configuration of the five knobs but the dominated trees (the optimum is over them)."""
    p = space.params
    if STEPS not in p:
        return grid_for(space, objective_for("datagen"))
    mem = p["mem_fraction_static"]
    n = round((mem.high - mem.low) / mem.step) + 1
    out = []
    for s in range(int(p[STEPS].low), int(p[STEPS].high) + 1):
        for k in p[TOPK].choices:
            for d in range(int(p[DRAFT].low), min(int(p[DRAFT].high), s * k + 1) + 1):
                if dominated_by(s, k, d) is not None:  # never launched: not an answer either
                    continue
                for i in range(n):
                    for h in p["hicache_size"].choices:
                        m = round(mem.low + i * mem.step, 6)
                        out.append(
                            {STEPS: s, TOPK: k, DRAFT: d, "mem_fraction_static": m}
                            | {"hicache_size": h}
                        )
    return out


def search_config(kind: str, base: dict) -> dict:
    if kind != "datagen":
        return base
    return {**base, "space": DATAGEN_SPACE, "enqueue": [DATAGEN_PRIOR], "enqueue_under_load": []}


def prepare(label: str, setup, kind: str, base: dict, references: bool = False) -> None:
    cfg = search_config(kind, base)
    space = SearchSpace.from_config(OmegaConf.create(cfg["space"]))
    oracle = Oracle(setup)
    land = Landscape(kind, oracle)
    points = all_points(space)
    if _ARGS is not None and _ARGS.jobs > 1:
        warm(land, points, _ARGS.jobs)
    truths = [land.true_value(p) for p in points]
    started = [t for t in truths if t is not None]
    optimum = max(started)
    _NEAR[label] = round(sum(t >= 0.98 * optimum for t in started) / len(started), 4)
    if references:
        prior = (cfg.get("enqueue") or [{}])[0]
        memory = {k: v for k, v in prior.items() if k in ("mem_fraction_static", "hicache_size")}
        _CHEAPEST[label] = cheapest_within(land, optimum, points, memory)
        _SCREEN[label] = screen_price(land, optimum, _CHEAPEST[label])
    oracle.save()
    _WORK[label] = (land, optimum, cfg, grid_for(space, objective_for(kind), cfg["memory"]))


# Set before a warm-up's workers fork (they inherit it): the landscape and its cache's keys then
_WARM: tuple[Landscape, set[str]] | None = None


def warm(land: Landscape, points: list[dict], jobs: int) -> None:
    """The simulator's answers for every point of a landscape, computed by `jobs` processes into
    its oracle's cache: on a cold cache (a new machine, or a changed simulator) a landscape's
    thousands of launches and steady states are most of a run, one landscape at a time without
    this (a memory-tight member: over half an hour of one core). The answers are the same
    whichever process computes them (the oracle's model is deterministic); where every point is
    cached the workers only look them up."""
    global _WARM
    _WARM = (land, land.oracle.known())
    # contiguous chunks, several per process: a configuration's fractions share steady states
    n = 8 * jobs
    chunks = [points[i * len(points) // n : (i + 1) * len(points) // n] for i in range(n)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for answers in pool.imap_unordered(_answers, chunks):
            land.oracle.learn(answers)
    _WARM = None


def _answers(points: list[dict]) -> dict[str, list]:
    assert _WARM is not None
    land, known = _WARM
    for values in points:
        land.true_value(values)
    return land.oracle.answers_since(known)


def one_seed(task: tuple[str, int, tuple[str, ...]]) -> tuple[str, int, dict]:
    label, seed, arms = task
    land, optimum, cfg, grid = _WORK[label]
    assert _ARGS is not None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)  # CmaEsSampler: constraints unused
    out = {}
    for name in arms:
        sim = Simulation(land, optimum, random.Random(seed), _ARGS.drift)
        t = time.monotonic()
        run_arm(BY_NAME[name], sim, cfg, seed, _ARGS.budget, grid, _CHEAPEST.get(label))
        out[name] = (sim.reached, sim.starts, sim.gpu_hours, time.monotonic() - t)
    return label, seed, out


def run_set(name: str, labels: list[str], arms: list[str], args) -> tuple[list[dict], dict]:
    tasks = [
        (label, seed, tuple(a for a in arms if a != "gp" or seed < args.gp_seeds))
        for seed in range(args.seeds)
        for label in labels
    ]
    results: dict[str, dict[str, list]] = {
        label: {a: [None] * args.seeds for a in arms} for label in labels
    }
    cost: dict[str, float] = {a: 0.0 for a in arms}
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            done = list(pool.imap_unordered(one_seed, tasks))
    else:
        done = [one_seed(t) for t in tasks]
    # every search's outcome, one file per set (kept should a summary fail, and for re-reading)
    raw = {f"{label} {seed}": out for label, seed, out in done}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.with_suffix(f".{name}.raw.json").write_text(json.dumps(raw) + "\n")
    for label, seed, out in done:
        for name, (reached, _starts, _gh, secs) in out.items():
            results[label][name][seed] = reached
            cost[name] += secs
    summaries = []
    for label in labels:
        runs = {a: v[: args.gp_seeds] if a == "gp" else v for a, v in results[label].items()}
        summaries.append(_search_report.summarize_landscape(label, _WORK[label][1], runs))
        summaries[-1]["share_within_2pct"] = _NEAR[label]
        if label in _CHEAPEST:
            summaries[-1]["cheapest_within_2pct"] = _CHEAPEST[label]
            summaries[-1]["screen_gpu_hours"] = round(_SCREEN[label], 6)
    return summaries, {a: round(s, 1) for a, s in cost.items()}


def main() -> None:
    global _ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="?", const=",".join(SETUPS), default=None)
    parser.add_argument("--family", nargs="?", type=int, const=30, default=0)
    parser.add_argument("--family-shapes", nargs="?", type=int, const=30, default=0)
    parser.add_argument("--family-memory-tight", nargs="?", type=int, const=30, default=0)
    parser.add_argument("--family-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--gp-seeds", type=int, default=None, help="seeds GPSampler gets")
    parser.add_argument("--budget", type=int, default=150, help="max server starts per search")
    parser.add_argument("--objectives", default="single,multi")
    parser.add_argument("--family-objectives", default="single")
    parser.add_argument("--arms", default=",".join(a.name for a in ARMS))
    parser.add_argument("--memory", default="auto", help="search.memory for every arm")
    parser.add_argument("--drift", type=float, default=DRIFT_SIGMA, help="the sim's --sim-drift")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--quick", action="store_true", help="5 seeds, 8 family members")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/search_efficiency.json")
    add_smoke_flag(parser)
    parser.add_argument(
        "--render-from",
        nargs="+",
        metavar="JSON[:SET,...]",
        help="write docs/results/search_efficiency.md from the JSON of earlier runs (several: "
        "one run per set, the header naming each, their sets together written to --json), "
        "and stop",
    )
    args = parser.parse_args()
    if args.render_from:
        try:
            report = _search_runs.merged(args.render_from)
        except (OSError, ValueError) as e:
            parser.error(f"--render-from {e}")
        if isinstance(report["produced"], list):  # several runs: the JSON the file shows
            args.json.write_text(json.dumps(report, indent=2) + "\n")  # each run's record kept
        write_results("search_efficiency", result_tables(report), simulated=True,
                      made=report["produced"])  # fmt: skip
        return
    if args.smoke:  # one box, one objective, two seeds: every step of a search and the bar
        args.profiles, args.objectives, args.seeds = "rtx_pro_6000_pcie", "single", 2
        args.arms, args.budget, args.family, args.family_shapes = SMOKE_ARMS, 40, 0, 0
        if args.family_memory_tight:  # its own smoke: one memory-tight member under load
            args.profiles, args.family_memory_tight = None, 1
    args.json = output_path(args.json, args.smoke)
    if args.profiles is None and not (
        args.family or args.family_shapes or args.family_memory_tight
    ):
        args.profiles = ",".join(SETUPS)
    if args.quick:
        args.seeds, args.family = min(args.seeds, 5), min(args.family, 8)
        args.family_shapes = min(args.family_shapes, 8)
        args.family_memory_tight = min(args.family_memory_tight, 8)
    args.gp_seeds = min(args.gp_seeds if args.gp_seeds is not None else args.seeds, args.seeds)
    _ARGS = args
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    base = OmegaConf.to_container(OmegaConf.load(SPACE_FILE), resolve=True)
    assert isinstance(base, dict)
    base["memory"] = args.memory
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in BY_NAME]
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)}; the arms are {', '.join(BY_NAME)}")
    references = any(BY_NAME[a].reference for a in arms)
    report: dict = {
        "seeds": args.seeds,
        "gp_seeds": args.gp_seeds,
        "budget_launches": args.budget,
        "noise": {
            "drift_sigma": args.drift,
            "drift_time_s": DRIFT_TIME_S,
            "sampling_cv": SAMPLING_CV,
        },
        "levels": list(LEVELS),
        "arms": {a.name: a.describe() for a in ARMS if a.name in arms},
        "sets": {},
    }
    started = time.monotonic()
    sets = []
    if args.profiles:
        labels = []
        for kind in args.objectives.split(","):
            for name in args.profiles.split(","):
                labels.append(f"{name} {kind}")
                prepare(labels[-1], SETUPS[name], kind, base, references)
        sets.append(("profiles", labels))
    for name, n, shapes, tight in (
        ("family", args.family, False, False),
        ("family-shapes", args.family_shapes, True, False),
        ("family-memory-tight", args.family_memory_tight, False, True),
    ):
        if not n:
            continue
        labels = []
        members = _search_family.family(n, args.family_seed, shapes, tight)
        kinds = ["multi"] if tight else args.family_objectives.split(",")  # where memory decides
        for setup, _constants in members:
            for kind in kinds:
                labels.append(f"{setup.name} {kind}")
                prepare(labels[-1], setup, kind, base, references)
        sets.append((name, labels))
        report[name.replace("-", "_")] = {
            "seed": args.family_seed,
            "ranges": _search_family.describe_ranges(shapes, tight),
            "members": {s.name: c for s, c in members},
        }
    report["prepare_s"] = round(time.monotonic() - started, 1)
    _search_report.print_arms(arms)
    for name, labels in sets:
        t = time.monotonic()
        landscapes, cost = run_set(name, labels, arms, args)
        summary = _search_report.summarize_set(landscapes)
        report["sets"][name] = {
            "landscapes": landscapes,
            "summary": summary,
            "arm_cpu_s": cost,
            "wall_s": round(time.monotonic() - t, 1),
        }
        landscape_title, set_title = titles(report, name)
        if name == "profiles" or len(labels) <= 6:
            _search_report.print_landscapes(landscape_title, landscapes)
        _search_report.print_set(set_title, summary)
        print(f"{name}: {report['sets'][name]['wall_s']} s; CPU s per arm: {cost}")
    report["wall_s"] = round(time.monotonic() - started, 1)
    for table in _search_bar.report_tables(report):
        _search_report.print_table(table)
    write_json(args.json, _search_report.jsonable(report), "search_efficiency")
    write_results("search_efficiency", result_tables(report), simulated=True, smoke=args.smoke)
    # A search that launched nothing, or a landscape an arm did not search, is a broken path,
    # whatever the medians say.
    broken = [
        f"{name}: {land['landscape']} {r['arm']}"
        for name, s in report["sets"].items()
        for land in s["landscapes"]
        for r in land["arms"]
        if not r["launches"] or r["launches"] < 1
    ]
    if broken:
        raise SystemExit(f"searches that launched nothing: {', '.join(broken)}")


def titles(report: dict, name: str) -> tuple[str, str]:
    """The titles of a set's two tables (its landscapes, its arms against the best other)."""
    n = report["noise"]
    noise = f"drift {n['drift_sigma']:g} (corr {n['drift_time_s']:g} s), "
    noise += f"sampling {n['sampling_cv']:g} per run"
    return (  # escaped: rich reads "[bootstrap 95%]" as a style tag and drops it
        f"SIMULATED {name}: GPU-hours and launches to 2% of the optimum, median of "
        f"{report['seeds']} seeds {escape('[bootstrap 95%]')} ({noise})",
        f"SIMULATED {name}: each arm against the best other arm",
    )


def result_tables(report: dict) -> list:
    """The tables a run prints, from its report (as run, or as read back from its JSON)."""
    out = _search_bar.report_tables(report)
    for name, s in report["sets"].items():
        landscape_title, set_title = titles(report, name)
        if name == "profiles" or len(s["landscapes"]) <= 6:
            out.append(_search_report.landscapes_table(landscape_title, s["landscapes"]))
        out.append(_search_report.set_table(set_title, s["summary"]))
    return out


if __name__ == "__main__":
    main()
