"""How many server starts and GPU-hours does each search need to get within 2% of the optimum?

Evaluates strategies on the simulator's performance model in-process (`harness.sim.oracle`, the
code the simulator serves), with each launch's simulated start-up, benchmark and OOM costs:
- specsweep: this project's search (TPE with OOM constraints, duplicate and predicted-OOM skips,
  early stopping, SGLang's recommended 3/1/4 measured first), as the sweeper runs it;
- specsweep-no-prior: the same without the enqueued 3/1/4;
- grid: every point of the space in the order of SGLang's bench_speculative.py
  (itertools.product over steps, topk, draft tokens; then mem_fraction_static, hicache_size),
  skipping `steps * topk + 1 < draft_tokens` as it does;
- random: uniform random configurations from the same space.
The space is conf/search/eagle3_five.yaml. "Trials" counts server starts; a skipped duplicate or
predicted OOM costs nothing. Reached = a launched, successful trial whose true (noise-free)
speed is within 2% of the space's optimum.

    python benchmarks/search_efficiency.py [--seeds 20] [--budget 150] [--json PATH]
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
from functools import cache
from pathlib import Path

import optuna
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.command import server_flags  # noqa: E402
from harness.results import Outcome, RunSummary, TrialResult  # noqa: E402
from harness.sim.oracle import evaluate  # noqa: E402
from harness.spec import EarlyStop, ServerSpec  # noqa: E402
from harness.stats import summarize  # noqa: E402
from sweep.study.candidates import candidate_for  # noqa: E402
from sweep.study.driver import SearchDriver  # noqa: E402
from sweep.study.objective import Objective  # noqa: E402
from sweep.study.space import DRAFT, STEPS, TOPK, SearchSpace  # noqa: E402

PROFILES = ("rtx_pro_6000_pcie", "h200_nvlink")
DRAFTER = "eagle3_37k_ttt5"
MAX_TOKENS, WARMUP, RUNS, REQUESTS = 2048, 2, 5, 3
RUN_CV = 0.01  # run-to-run spread the simulator shows at the quickstart's settings
GPUS = 8
PRIOR = {STEPS: 3, TOPK: 1, DRAFT: 4, "mem_fraction_static": 0.85, "hicache_size": 0}


def server_for(values: dict) -> ServerSpec:
    return ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/drafter",
        speculative_num_steps=values[STEPS],
        speculative_eagle_topk=values[TOPK],
        speculative_num_draft_tokens=values[DRAFT],
        mem_fraction_static=values["mem_fraction_static"],
        hicache_size=values["hicache_size"],
    )


@cache
def truth(profile: str, key: tuple) -> tuple[str, str | None, float | None, float]:
    values = dict(key)
    argv = [*server_flags(server_for(values)), "--sim-hardware", profile, "--sim-drafter", DRAFTER]
    e = evaluate(argv, MAX_TOKENS)
    return e.outcome, e.oom_kind, e.tok_s, e.startup_s


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


class Simulation:
    """One search on one profile: launches cost simulated time; tracks when 2% is reached."""

    def __init__(self, profile: str, optimum: float, rng: random.Random):
        self.profile, self.optimum, self.rng = profile, optimum, rng
        self.starts, self.seconds = 0, 0.0
        self.reached: tuple[int, float] | None = None

    def launch(self, values: dict, early_stop: EarlyStop | None = None) -> TrialResult:
        key = tuple(sorted(values.items()))
        # SGLang forces draft = steps + 1 at topk 1: the server runs that.
        if values[TOPK] == 1:
            key = tuple(sorted({**values, DRAFT: values[STEPS] + 1}.items()))
        outcome, kind, tok_s, startup = truth(self.profile, key)
        self.starts += 1
        self.seconds += startup
        result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, dict(values))
        if outcome == "oom":
            result.outcome, result.oom_kind = Outcome.OOM, kind
            return result
        request_s = MAX_TOKENS / tok_s
        self.seconds += WARMUP * request_s
        runs: list[RunSummary] = []
        for run in range(1, RUNS + 1):
            self.seconds += REQUESTS * request_s
            value = tok_s * self.rng.gauss(1.0, RUN_CV)
            runs.append(RunSummary(run, 1, REQUESTS, 0, 0, value, value, value, 0.1, None, None))
            if early_stop and early_stop.should_stop(runs):
                result.outcome = Outcome.PRUNED
                break
        stat = summarize([r.decode_tok_s for r in runs])
        result.runs = runs
        result.metrics = {"tok_s": stat.mean}
        if stat.n > 1:
            result.metrics["tok_s_ci95"] = stat.ci95
        if result.outcome is Outcome.OK and self.reached is None and tok_s >= 0.98 * self.optimum:
            self.reached = (self.starts, self.seconds * GPUS / 3600)
        return result


def run_specsweep(sim: Simulation, space: SearchSpace, seed: int, budget: int, prior: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=5, multivariate=True, group=True, constant_liar=True
        )
    study = optuna.create_study(sampler=sampler, directions=["maximize"])
    if prior:
        study.enqueue_trial(PRIOR)
    driver = SearchDriver(study, Objective("tok_s", 64))
    proposals = 0
    while sim.reached is None and sim.starts < budget and proposals < 4 * budget:
        proposals += 1
        trial = study.ask()
        values = space.suggest(trial)
        candidate = candidate_for(server_for(values), "bench")
        verdict = driver.verdict(candidate)
        if verdict.launch:
            below = driver.prune_below()
            stop = EarlyStop(below=below, concurrency=1) if below else None
            result = sim.launch(values, stop)
        else:
            result = TrialResult("t", "trial", Outcome.DUPLICATE, "sim", True, 1.0, dict(values))
            if verdict.action == "predicted_oom":
                result.outcome = Outcome.PREDICTED_OOM
        driver.tell(trial, candidate, result, None, verdict.source)


def run_random(sim: Simulation, space: SearchSpace, seed: int, budget: int):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    while sim.reached is None and sim.starts < budget:
        trial = study.ask()
        sim.launch(space.suggest(trial))
        study.tell(trial, 0.0)


def run_grid(sim: Simulation, points: list[dict]):
    for values in points:
        if sim.reached is not None:
            return
        sim.launch(values)


def median_or_none(values: list[float | None]) -> float | None:
    finite = [v if v is not None else float("inf") for v in values]
    m = statistics.median(finite)
    return None if m == float("inf") else m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=150, help="max server starts per search")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/search_efficiency.json")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = SearchSpace.from_config(OmegaConf.load(ROOT / "conf/search/eagle3_five.yaml").space)
    points = grid_points(space)
    report = {"profiles": [], "seeds": args.seeds, "budget": args.budget, "grid_size": len(points)}
    started = time.monotonic()
    for profile in PROFILES:
        values = [truth(profile, tuple(sorted(p.items()))) for p in points]
        optimum = max(v[2] for v in values if v[2] is not None)
        strategies = {"specsweep": [], "specsweep-no-prior": [], "random": [], "grid": []}
        for seed in range(args.seeds):
            for name in strategies:
                sim = Simulation(profile, optimum, random.Random(seed))
                if name == "grid":
                    run_grid(sim, points)
                elif name == "random":
                    run_random(sim, space, seed, max(args.budget, len(points)))
                else:
                    run_specsweep(sim, space, seed, args.budget, prior=name == "specsweep")
                strategies[name].append(sim.reached)
        report["profiles"].append(
            {
                "profile": profile,
                "optimum_tok_s": round(optimum, 2),
                "strategies": [
                    {
                        "name": name,
                        "median_trials_to_2pct": median_or_none([r and r[0] for r in reached]),
                        "median_gpu_hours_to_2pct": median_or_none([r and r[1] for r in reached]),
                        "reached": sum(r is not None for r in reached),
                        "runs": len(reached),
                    }
                    for name, reached in strategies.items()
                ],
            }
        )
    table = Table(title=f"Search efficiency on the simulator's model ({args.seeds} seeds each)")
    for column in (
        "profile",
        "optimum tok/s",
        "strategy",
        "median starts",
        "median GPU-h",
        "vs grid (starts / GPU-h)",
        "reached",
    ):
        table.add_column(column, justify="left" if column in ("profile", "strategy") else "right")
    for prof in report["profiles"]:
        grid = next(s for s in prof["strategies"] if s["name"] == "grid")
        for s in prof["strategies"]:

            def ratio(key, s=s, grid=grid):
                a, b = s[key], grid[key]
                return f"{a / b:.2f}" if a is not None and b else "-"

            table.add_row(
                prof["profile"],
                f"{prof['optimum_tok_s']:.1f}",
                s["name"],
                "-" if s["median_trials_to_2pct"] is None else f"{s['median_trials_to_2pct']:.0f}",
                "-"
                if s["median_gpu_hours_to_2pct"] is None
                else f"{s['median_gpu_hours_to_2pct']:.1f}",
                f"{ratio('median_trials_to_2pct')} / {ratio('median_gpu_hours_to_2pct')}",
                f"{s['reached']}/{s['runs']}",
            )
    Console(width=max(Console().width, 120)).print(table)
    report["wall_s"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"grid size {len(points)} configurations; wrote {args.json} in {report['wall_s']} s")


if __name__ == "__main__":
    main()
