"""How many GPU-hours (and server starts) does each search need to get within 2% of the optimum?

Runs whole searches in-process on the simulator's model (`benchmarks/_search_landscape.py`: the
code the simulator serves, with each launch's simulated start-up and benchmark time) over the
space conf/search/eagle3_five.yaml, on two hardware profiles and two objectives (`single`:
single-stream tok/s; `multi`: weighted throughput over concurrency 1, 8, 32, 64):
- specsweep: this project's search as the sweeper runs it: the sampler `sweep.study.opening`
  builds (TPE inside `sweep.study.memory`'s memory policy), `SearchDriver`'s verdicts (duplicate,
  predicted OOM, re-check) and tells (OOM constraints), early stopping, SGLang's recommended 3/1/4
  enqueued first; costs priced by `sweep.study.budget` from what each launch recorded;
- specsweep-no-prior: the same without the enqueued 3/1/4 (and 1/1/2 under load);
- grid: every point in the order of SGLang's bench_speculative.py (itertools.product over steps,
  topk, draft tokens; then mem_fraction_static, hicache_size), skipping
  `steps * topk + 1 < draft_tokens` as it does;
- grid-shuffled: the same points in a random order without repeats, as Optuna's GridSampler (and
  so Hydra's Optuna sweeper with a grid) visits them: seeded like the others;
- random: uniform random configurations from the same space (every launch paid).
GPU-hours = (start-up + benchmark time) x 8 GPUs, summed over launches; a duplicate or predicted
OOM costs nothing. Reached = a launched, successful trial whose true (noise-free) value is within
2% of the space's optimum. SIMULATED: it compares search strategies on one model of the
hardware, not the hardware.

    python benchmarks/search_efficiency.py [--seeds 20] [--budget 150] [--objectives single,multi]
        [--profiles rtx_pro_6000_pcie,h200_nvlink] [--memory auto|pin|ceiling|sample] [--quick]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

import optuna
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _search_landscape import (  # noqa: E402
    DATAGEN_C,
    LEVELS,
    PROFILES,
    Landscape,
    Oracle,
    Simulation,
)

from harness.record.results import Outcome, TrialResult  # noqa: E402
from harness.spec import EarlyStop  # noqa: E402
from sweep.study.budget import Budget  # noqa: E402
from sweep.study.candidates import candidate_for  # noqa: E402
from sweep.study.driver import SearchDriver  # noqa: E402
from sweep.study.objective import Objective  # noqa: E402
from sweep.study.opening import make_sampler  # noqa: E402
from sweep.study.priors import first_trials  # noqa: E402
from sweep.study.space import DRAFT, STEPS, TOPK, SearchSpace  # noqa: E402

SPACE_FILE = ROOT / "conf/search/eagle3_five.yaml"
STRATEGIES = ("specsweep", "specsweep-no-prior", "random", "grid", "grid-shuffled")
TARGET_VS_RANDOM, TARGET_VS_GRID = 0.5, 0.02


def grid_points(space: SearchSpace) -> list[dict]:
    p = space.params
    steps = range(int(p[STEPS].low), int(p[STEPS].high) + 1)
    drafts = range(int(p[DRAFT].low), int(p[DRAFT].high) + 1)
    mem = p["mem_fraction_static"]
    n_mem = round((mem.high - mem.low) / mem.step) + 1
    mems = [round(mem.low + i * mem.step, 6) for i in range(n_mem)]
    points = []
    for s, k, d, m, h in itertools.product(
        steps, p[TOPK].choices, drafts, mems, p["hicache_size"].choices
    ):
        if s * k + 1 < d:  # bench_speculative.py's filter
            continue
        points.append({STEPS: s, TOPK: k, DRAFT: d, "mem_fraction_static": m, "hicache_size": h})
    return points


DATAGEN_SPACE = {
    "mem_fraction_static": {"type": "float", "low": 0.82, "high": 0.94, "step": 0.01},
    "hicache_size": {"type": "categorical", "choices": [0, 48]},
}
DATAGEN_PRIOR = {"mem_fraction_static": 0.85, "hicache_size": 0}  # where the seeds started


def datagen_points() -> list[dict]:
    mems = [round(0.82 + i / 100, 2) for i in range(13)]
    return [{"mem_fraction_static": m, "hicache_size": h} for m in mems for h in (0, 48)]


def objective_for(kind: str) -> Objective:
    if kind == "single":
        return Objective("tok_s", 64)
    if kind == "datagen":
        return Objective("throughput", DATAGEN_C)
    return Objective("weighted_throughput", 64, levels=LEVELS)


def run_specsweep(sim: Simulation, search_cfg, seed: int, budget: int, prior: bool) -> None:
    """The sweeper's loop (sweep.study.trials) without Hydra: ask, suggest, verdict, launch with
    the early-stop bound, tell, until reached or `budget` launches."""
    objective = objective_for(sim.land.kind)
    cfg = OmegaConf.create({"search": {**search_cfg, "seed": seed}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = make_sampler(cfg, objective)
    study = optuna.create_study(sampler=sampler, directions=objective.directions)
    if prior:
        for params in first_trials(OmegaConf.create(search_cfg), objective):
            study.enqueue_trial(params)
    space = SearchSpace.from_config(cfg.search.space)
    driver = SearchDriver(study, objective, gpus_per_trial=8)
    idle = Budget(None)
    while sim.reached is None and sim.starts < budget and idle.idle < 4 * budget:
        trial = study.ask()
        values = space.suggest(trial)
        candidate = candidate_for(sim.land.server(values), "bench")
        verdict = driver.verdict(candidate)
        if verdict.launch:
            driver.begin(trial, verdict)
            below = driver.prune_below()
            level = objective.run_metric()[1] or 1
            stop = EarlyStop(below=below, concurrency=level) if below else None
            result = sim.launch(values, stop)
        else:
            result = TrialResult("t", "trial", Outcome.DUPLICATE, "sim", True, 1.0, dict(values))
            if verdict.action == "predicted_oom":
                result.outcome = Outcome.PREDICTED_OOM
        idle.note(result)
        driver.tell(trial, candidate, result, None, verdict.source)


def run_random(sim: Simulation, space: SearchSpace, seed: int, budget: int) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    while sim.reached is None and sim.starts < budget:
        trial = study.ask()
        sim.launch(space.suggest(trial))
        study.tell(trial, 0.0)


def run_grid(sim: Simulation, points: list[dict]) -> None:
    for values in points:
        if sim.reached is not None:
            return
        sim.launch(values)


def median_or_none(values: list[float | None]) -> float | None:
    finite = [v if v is not None else float("inf") for v in values]
    m = statistics.median(finite)
    return None if m == float("inf") else m


def evaluate_profile(profile, kind, args, points, search_cfg) -> dict:
    if kind == "datagen":
        points = datagen_points()
        search_cfg = {
            **search_cfg,
            "space": DATAGEN_SPACE,
            "enqueue": [DATAGEN_PRIOR],
            "enqueue_under_load": [],
        }
    oracle = Oracle(profile)
    land = Landscape(kind, oracle)
    truths = [land.true_value(p) for p in points]
    optimum = max(t for t in truths if t is not None)
    oracle.save()
    space = SearchSpace.from_config(OmegaConf.create(search_cfg["space"]))
    strategies: dict[str, list] = {name: [] for name in STRATEGIES}
    for seed in range(args.seeds):
        for name in STRATEGIES:
            if name == "grid" and seed > 0:  # deterministic: one run is every run
                strategies[name].append(strategies[name][0])
                continue
            sim = Simulation(land, optimum, random.Random(seed))
            if name == "grid":
                run_grid(sim, points)
            elif name == "grid-shuffled":
                run_grid(sim, random.Random(seed).sample(points, len(points)))
            elif name == "random":
                run_random(sim, space, seed, max(args.budget, len(points)))
            else:
                run_specsweep(sim, search_cfg, seed, args.budget, prior=name == "specsweep")
            strategies[name].append(sim.reached)
    oracle.save()
    rows = []
    for name, reached in strategies.items():
        rows.append(
            {
                "name": name,
                "median_gpu_hours_to_2pct": median_or_none([r and r[1] for r in reached]),
                "median_launches_to_2pct": median_or_none([r and r[0] for r in reached]),
                "reached": sum(r is not None for r in reached),
                "runs": len(reached),
            }
        )
    by = {r["name"]: r for r in rows}
    ours = by["specsweep"]["median_gpu_hours_to_2pct"]
    vs_random = ratio(ours, by["random"]["median_gpu_hours_to_2pct"])
    vs_grid = ratio(ours, by["grid"]["median_gpu_hours_to_2pct"])
    vs_shuffled = ratio(ours, by["grid-shuffled"]["median_gpu_hours_to_2pct"])
    return {
        "profile": profile,
        "objective": kind,
        "objective_label": objective_for(kind).labels[0],
        "optimum": round(optimum, 2),
        "strategies": rows,
        "specsweep_vs_random_gpu_hours": vs_random,
        "specsweep_vs_grid_gpu_hours": vs_grid,  # the target's grid: bench_speculative's order
        "specsweep_vs_grid_shuffled_gpu_hours": vs_shuffled,
        "meets_targets": vs_random is not None
        and vs_grid is not None
        and vs_random <= TARGET_VS_RANDOM
        and vs_grid <= TARGET_VS_GRID,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def print_table(report: dict) -> None:
    table = Table(
        title=f"SIMULATED search efficiency: GPU-hours to 2% of the optimum "
        f"(median of {report['seeds']} seeds)"
    )
    columns = (
        "profile",
        "objective",
        "optimum",
        "strategy",
        "GPU-h",
        "launches",
        "vs random",
        "vs grid",
        "reached",
    )
    for column in columns:
        left = column in ("profile", "objective", "strategy")
        table.add_column(column, justify="left" if left else "right")
    for prof in report["results"]:
        by = {s["name"]: s for s in prof["strategies"]}
        for s in prof["strategies"]:
            gh, n = s["median_gpu_hours_to_2pct"], s["median_launches_to_2pct"]
            r = ratio(gh, by["random"]["median_gpu_hours_to_2pct"])
            g = ratio(gh, by["grid"]["median_gpu_hours_to_2pct"])
            table.add_row(
                prof["profile"],
                prof["objective"],
                f"{prof['optimum']:.1f}",
                s["name"],
                "-" if gh is None else f"{gh:.2f}",
                "-" if n is None else f"{n:.1f}",
                "-" if r is None else f"{r:.2f}",
                "-" if g is None else f"{g:.3f}",
                f"{s['reached']}/{s['runs']}",
            )
    Console(width=max(Console().width, 130)).print(table)
    for prof in report["results"]:
        verdict = "meets" if prof["meets_targets"] else "MISSES"
        print(
            f"{prof['profile']} {prof['objective']}: specsweep {verdict} the targets "
            f"(GPU-h vs random {prof['specsweep_vs_random_gpu_hours']} <= {TARGET_VS_RANDOM}, "
            f"vs grid {prof['specsweep_vs_grid_gpu_hours']} <= {TARGET_VS_GRID}; "
            f"in GridSampler's order {prof['specsweep_vs_grid_shuffled_gpu_hours']})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=150, help="max server starts per search")
    parser.add_argument("--objectives", default="single,multi,datagen")
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--memory", default="auto", help="specsweep's search.memory")
    parser.add_argument("--quick", action="store_true", help="5 seeds: a quick look")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/search_efficiency.json")
    args = parser.parse_args()
    if args.quick:
        args.seeds = min(args.seeds, 5)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    search_cfg = OmegaConf.to_container(OmegaConf.load(SPACE_FILE), resolve=True)
    assert isinstance(search_cfg, dict)
    search_cfg["memory"] = args.memory
    space = SearchSpace.from_config(OmegaConf.create(search_cfg["space"]))
    points = grid_points(space)
    kinds = [k for k in args.objectives.split(",") if k]
    report = {
        "seeds": args.seeds,
        "budget": args.budget,
        "grid_size": len(points),
        "levels": list(LEVELS),
        "results": [],
    }
    started = time.monotonic()
    for kind in kinds:
        for profile in args.profiles.split(","):
            report["results"].append(evaluate_profile(profile, kind, args, points, search_cfg))
    print_table(report)
    report["wall_s"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"grid size {len(points)} configurations; wrote {args.json} in {report['wall_s']} s")


if __name__ == "__main__":
    main()
