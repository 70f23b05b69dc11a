"""The arms of search_efficiency, and the one loop every sequential arm runs.

What every arm is given, unless its row says otherwise (SHARED):
- the space conf/search/eagle3_five.yaml with SGLang's rules (`sweep.study.search.space`:
  draft tokens derived at topk 1, held to the tree's capacity above);
- the memory policy the sweeper applies (`search.memory=auto`, `sweep.study.search.memory`): at a
  single-stream objective the fraction is pinned (0.85, moved only where the group's learned OOM
  boundary says) and HiCache off; over a load profile the same while the KV pool the launches
  report (`max_total_num_tokens`, `_search_sim`) holds what the highest level keeps in flight
  (`Landscape.demand`, `sweep.study.trial.capacity`), and once it does not HiCache is searched and
  the fraction bisected towards the OOM boundary. The sampler models only what the policy leaves it;
- `SearchDriver`'s verdicts: an effective duplicate
  (`sweep.study.trial.candidates.candidate_for`: at topk 1 every draft-token value is one launch),
  a dominated tree (`candidates.dominating`) or a predicted OOM is not launched and costs
  nothing; the sampler is told the earlier result, OOMs as constraint violations;
- early stopping: a launch stops once its runs cannot beat the best trial's lower 95% bound
  (the sweeper's `EarlyStop`; single-stream objectives, the only ones it applies to);
- a budget of `--budget` launches; a search that proposes only what it knows 100 times in a
  row has nothing left to launch and stops there. Either way it is censored if not reached.
Priors (`+priors`): the enqueued 3/1/4 at 0.85, HiCache 0, and under load 1/1/2 too
(`sweep.study.search.priors`), measured before the sampler proposes anything; a prior runs below
0.85 where a launch already ran out of GPU memory there (`sweep.study.search.memory`).
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass

import optuna
from omegaconf import OmegaConf

from benchmarks._search_landscape import RUNS, Landscape
from benchmarks._search_sim import Simulation, launch_tokens
from harness.record.results import Outcome, TrialResult
from harness.sglang.speculative import dominated_by, forced_draft_tokens
from harness.spec import EarlyStop
from sweep.study.answer import pooling
from sweep.study.loop.decisions import SearchDriver
from sweep.study.loop.opening import make_sampler
from sweep.study.model import stopping
from sweep.study.model.observations import POOLED
from sweep.study.model.sampler import EXPLORE, model_sampler
from sweep.study.search import memory, priors
from sweep.study.search.priors import first_trials
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace
from sweep.study.trial.candidates import candidate_for
from sweep.study.trial.objective import Objective

IDLE_LIMIT = 100  # proposals in a row that launch nothing: the arm has nothing left to try
SHARED = (
    "memory policy (search.memory=auto), effective-duplicate, dominated-tree and predicted-OOM "
    "verdicts (free), early stopping, the same budget"
)


@dataclass(frozen=True)
class Arm:
    name: str
    sampler: str
    given: str  # what it is given beyond SHARED, in words
    priors: bool = False
    shared: bool = True  # False: the old random arm, given none of SHARED
    specsweep: bool = False
    reference: bool = False  # not a search: a floor that knows the landscape (never "best other")

    def describe(self) -> str:
        if self.reference:
            return self.given
        shared = SHARED if self.shared else "none of the shared rules"
        return f"{self.given}; {shared}" + ("; the priors enqueued first" if self.priors else "")


ARMS = (
    Arm(
        "specsweep+priors",
        "specsweep",
        "the sweeper's TPE (search.sampler.name=tpe, the default before issue 28; "
        "sweep.study.loop.opening: multivariate, group, constant liar, 5 start-up trials)",
        priors=True,
        specsweep=True,
    ),
    Arm("specsweep", "specsweep", "the sweeper's TPE, no priors", specsweep=True),
    Arm(
        "model+priors",
        "model",
        "search.sampler=model, the sweeper's default (sweep.study.model: per-depth acceptance, "
        "trees as SGLang selects them, a step cost over the captured CUDA-graph batches, the KV "
        "pool under load; a screened opening, expected improvement per "
        "GPU-hour, extrapolations screened first, 10% exploration, its stopping rule)",
        priors=True,
        specsweep=True,
    ),
    Arm("model", "model", "search.sampler=model, no priors", specsweep=True),
    Arm("random+priors", "random", "RandomSampler", priors=True),
    Arm("random", "random", "RandomSampler"),
    Arm("tpe+priors", "tpe", "TPESampler() as Optuna ships it", priors=True),
    Arm("tpe", "tpe", "TPESampler() as Optuna ships it (10 start-up trials, independent)"),
    Arm("tpe-mv-group", "tpe-mv", "TPESampler(multivariate=True, group=True)"),
    Arm("gp", "gp", "GPSampler() (torch; models the intersection space, 10 start-up trials)"),
    Arm(
        "cmaes",
        "cmaes",
        "CmaEsSampler(): models only int/float knobs present in every trial (steps; topk is "
        "categorical, draft tokens conditional), the rest RandomSampler; it ignores the OOM "
        "constraints (its own warning)",
    ),
    Arm(
        "grid-shuffled",
        "grid-shuffled",
        "every effective configuration once, in a seeded random order (GridSampler's)",
    ),
    Arm(
        "grid-ordered",
        "grid-ordered",
        "every effective configuration once, in bench_speculative.py's order",
    ),
    Arm(
        "random-unshared",
        "random-unshared",
        "RandomSampler over all five knobs, every draw launched and paid (duplicates and OOM "
        "repeats too), runs never stopped early: the earlier benchmark's random arm",
        shared=False,
    ),
    Arm(
        "clairvoyant",
        "clairvoyant",
        "not a search, a floor: it knows the landscape and launches once, in full, the "
        "configuration within 2% of the optimum that costs least to measure; no search that "
        "must measure an answer in full spends less",
        reference=True,
    ),
    Arm(
        "opening+clairvoyant",
        "opening+clairvoyant",
        "not a search, a floor: the model sampler's own first two launches (its screened "
        "opening), then the clairvoyant's launch, or an opening chain within 2% in full (its "
        "screen's run pooled) where that costs less; no proposer that opens as the model "
        "sampler does spends less",
        reference=True,
    ),
    Arm(
        "priors+clairvoyant",
        "priors+clairvoyant",
        "not a search, a floor: the priors as model+priors measures them (search.enqueue, and "
        "enqueue_under_load under load: enqueued, in full), then the clairvoyant's launch; no "
        "proposer that measures the priors in full spends less",
        priors=True,
        reference=True,
    ),
)
BY_NAME = {a.name: a for a in ARMS}


def objective_for(kind: str) -> Objective:
    from benchmarks._search_landscape import DATAGEN_C, LEVELS

    if kind == "single":
        return Objective("tok_s", 64)
    if kind == "datagen":
        return Objective("throughput", DATAGEN_C)
    return Objective("weighted_throughput", 64, levels=LEVELS)


def effective_points(space: SearchSpace, ordered: bool = True) -> list[dict]:
    """Every distinct launch of the speculative knobs, in bench_speculative.py's order
    (itertools.product over steps, topk, draft tokens, skipping steps*topk+1 < draft), each
    effective configuration once: at topk 1 SGLang runs draft = steps + 1 whatever is asked."""
    p = space.params
    seen, points = set(), []
    for s in range(int(p[STEPS].low), int(p[STEPS].high) + 1):
        for k in p[TOPK].choices:
            for d in range(int(p[DRAFT].low), int(p[DRAFT].high) + 1):
                if s * k + 1 < d:
                    continue
                d_eff = forced_draft_tokens(s, k) or d
                if (s, k, d_eff) in seen or dominated_by(s, k, d_eff) is not None:
                    continue  # a dominated tree is never launched (the driver's verdict)
                seen.add((s, k, d_eff))
                points.append({STEPS: s, TOPK: k} | ({} if k == 1 else {DRAFT: d_eff}))
    return points


def grid_for(space: SearchSpace, objective: Objective, mode: str = "auto") -> list[dict]:
    """The grid arms' points: the effective speculative points, times HiCache where the memory
    policy leaves HiCache to the sampler (`ceiling`); the fraction is the policy's."""
    if STEPS not in space.params:  # the datagen space: the memory knobs themselves, fixed
        mem = space.params["mem_fraction_static"]
        n = round((mem.high - mem.low) / mem.step) + 1
        fractions = [round(mem.low + i * mem.step, 6) for i in range(n)]
        choices = space.params["hicache_size"].choices
        return [{"mem_fraction_static": m, "hicache_size": h} for m in fractions for h in choices]
    points = effective_points(space)
    if memory.resolve_mode(mode, objective) == "pin" or "hicache_size" not in space.params:
        return points
    return [pt | {"hicache_size": h} for pt in points for h in space.params["hicache_size"].choices]


def _base(name: str, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name in ("random", "grid-shuffled", "grid-ordered"):
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        if name == "tpe-mv":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        if name == "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(f"unknown sampler {name!r}")


def _price(land: Landscape, optimum: float, values: dict, first_run: int = 1) -> float:
    """What a full launch of `values` costs to reach 2% (infinite where it does not), its runs
    from `first_run` on (after a screen of it: the rest); the price does not depend on the
    noise."""
    sim = Simulation(land, optimum, random.Random(0))
    sim.launch(values, runs=RUNS - first_run + 1, first_run=first_run)
    return sim.gpu_hours if sim.reached is not None else float("inf")


def screen_price(land: Landscape, optimum: float, values: dict) -> float:
    """What one screen of `values` costs (its start-up and one run per level, as the model
    sampler screens), set, as `_price` is, by its start-up and true rates."""
    sim = Simulation(land, optimum, random.Random(0))
    sim.launch(values, runs=1, screen=True)
    return sim.gpu_hours


def cheapest_within(
    land: Landscape, optimum: float, points: list[dict], prefer: dict | None = None
) -> dict:
    """The configuration within 2% of the optimum whose full launch costs least (start-up plus
    a benchmark whose length is set by the true rate: the price does not depend on the noise).
    Of launches that cost the same, the one a sweep would make: the values in `prefer` (the
    first prior's memory knobs) and, at topk 1, the draft tokens SGLang runs."""
    prefer = prefer or {}

    def unusual(values: dict) -> int:
        forced = forced_draft_tokens(values.get(STEPS, 0), values.get(TOPK, 0))
        moved = sum(values.get(k, v) != v for k, v in prefer.items())
        return moved + int(forced is not None and values.get(DRAFT) != forced)

    best, cost = None, float("inf")
    priced: dict[tuple, float] = {}  # a launch's price is set by its start-up and true rates
    for values in sorted(points, key=unusual):
        true = land.true_value(values)
        if true is None or true < 0.98 * optimum:
            continue
        startup = land.oracle.point(values, launch_tokens(land.kind))[3]
        rates = tuple(land.oracle.multi(values).items()) if land.kind == "multi" else true
        key = (startup, rates)
        if key not in priced:
            priced[key] = _price(land, optimum, values)
        if priced[key] < cost:
            best, cost = values, priced[key]
    assert best is not None, "the optimum itself is within 2%"
    return best


def _cheapest_after(sim: Simulation, answer: dict) -> None:
    """The clairvoyant's launch after the opening: `answer` in full, or a configuration the
    opening screened launched in full after it (the runs its screen did not measure, as the
    sweeper pools them) where that reaches 2% for less."""
    options = [(answer, 1)] + [(values, 2) for values in sim.screened]
    priced = [(_price(sim.land, sim.optimum, v, first), i) for i, (v, first) in enumerate(options)]
    values, first = options[min(priced)[1]]
    sim.launch(values, runs=RUNS - first + 1, first_run=first)


def run_arm(
    arm: Arm,
    sim: Simulation,
    search_cfg: dict,
    seed: int,
    budget: int,
    grid: list[dict],
    answer: dict | None = None,
    asks: int | None = None,
) -> None:
    """One search of `arm` on `sim` until it reached 2%, spent `budget` launches, ran dry or
    was asked `asks` trials (None: no limit); the reference arms launch `answer`
    (`cheapest_within`), after the model's opening or the priors where they are floors of
    those."""
    if arm.reference:
        assert answer is not None, f"{arm.name} needs the landscape's cheapest answer"
        if arm.sampler == "opening+clairvoyant":
            run_arm(BY_NAME["model"], sim, search_cfg, seed, min(2, budget), grid)
            if sim.reached is None:  # the cheapest way on: the answer, or a screen in full
                _cheapest_after(sim, answer)
                return None
        if arm.sampler == "priors+clairvoyant":  # model+priors launches its priors first
            n = len(first_trials(OmegaConf.create(search_cfg), objective_for(sim.land.kind)))
            run_arm(BY_NAME["model+priors"], sim, search_cfg, seed, budget, grid, asks=n)
        if sim.reached is None:
            sim.launch(answer)
        return None
    if not arm.shared:
        return _run_unshared(sim, search_cfg, seed, budget)
    objective = objective_for(sim.land.kind)
    cfg = OmegaConf.create({"search": {**search_cfg, "seed": seed}})
    if arm.sampler in ("specsweep", "model"):
        if arm.sampler == "model":
            cfg.search.sampler = {"name": "model", "explore": EXPLORE}
        else:  # the sweeper's TPE, whatever conf/ makes the default
            cfg.search.sampler = {"name": "tpe", "n_startup_trials": 5}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = make_sampler(cfg, objective, sim.land.demand())
    else:
        mode = str(search_cfg["memory"])
        sampler = memory.wrap(_base(arm.sampler, seed), mode, objective, sim.land.demand())
    study = optuna.create_study(sampler=sampler, directions=objective.directions)
    if arm.priors:
        priors.enqueue(study, OmegaConf.create(search_cfg), objective, skip_if_exists=False)
    if arm.sampler.startswith("grid"):
        order = (
            grid if arm.sampler == "grid-ordered" else random.Random(seed).sample(grid, len(grid))
        )
        for params in order:
            study.enqueue_trial(params, skip_if_exists=False)
        asks = len(order) + (len(first_trials(cfg.search, objective)) if arm.priors else 0)
    _loop(study, sim, objective, SearchSpace.from_config(cfg.search.space), budget, asks)


def _loop(study, sim: Simulation, objective: Objective, space, budget: int, asks) -> None:
    """The sweeper's loop (sweep.study.loop.trials) without Hydra: ask, suggest, verdict, launch
    with the early-stop bound, tell."""
    driver = SearchDriver(study, objective, gpus_per_trial=sim.gpus)
    model = model_sampler(study.sampler)
    screens: dict[str, TrialResult] = {}  # candidate key -> its screen, not yet pooled
    idle = n = 0
    while sim.reached is None and sim.starts < budget and idle < IDLE_LIMIT:
        if asks is not None and n >= asks:
            return
        if model is not None and stopping.decide(model, study) is not None:
            return  # the model's stopping rule: nothing left can beat the best measured
        n += 1
        trial = study.ask()
        values = space.suggest(trial)
        candidate = candidate_for(sim.land.server(values), "bench")
        verdict = driver.verdict(candidate)
        if verdict.launch:
            driver.begin(trial, verdict)
            below = driver.prune_below()
            level = objective.run_metric()[1] or 1
            stop = EarlyStop(below=below, concurrency=level) if below else None
            proposal = model.proposals.get(trial.number) if model is not None else None
            screen = proposal is not None and proposal.screen
            # in full after a screen: the runs it did not measure, its run pooled in (as the
            # sweeper does, sweep.study.loop.screens)
            earlier = None if screen else screens.pop(candidate.key, None)
            if earlier is None:
                result = sim.launch(values, stop, runs=1 if screen else RUNS, screen=screen)
            else:
                done = max(r.run for r in earlier.runs)
                result = sim.launch(values, stop, runs=RUNS - done, first_run=done + 1)
                if result.outcome in (Outcome.OK, Outcome.PRUNED):
                    result = pooling.pool_screen(result, earlier, level)
                    trial.set_user_attr(POOLED, earlier.number)
            if screen and result.outcome is Outcome.PRUNED:
                result.number = trial.number
                screens[candidate.key] = result
            idle = 0
        else:
            result = TrialResult("t", "trial", Outcome.DUPLICATE, "sim", True, 1.0, dict(values))
            if verdict.action == "predicted_oom":
                result.outcome = Outcome.PREDICTED_OOM
            elif verdict.action == "dominated":
                result.outcome = Outcome.DOMINATED
            idle += 1
        driver.tell(trial, candidate, result, None, verdict.source)


def _run_unshared(sim: Simulation, search_cfg: dict, seed: int, budget: int) -> None:
    space = SearchSpace.from_config(OmegaConf.create(search_cfg["space"]))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    while sim.reached is None and sim.starts < budget:
        trial = study.ask()
        sim.launch(space.suggest(trial))
        study.tell(trial, 0.0)


def landscape_label(land: Landscape) -> str:
    return f"{land.oracle.setup.name} {land.kind}"
