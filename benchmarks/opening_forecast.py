"""What the model knows after its opening: its forecasts of tokens per verify step, seconds per
verify step and tok/s for the configurations that decide a search, against the truth.

On each named box's single-stream landscape (benchmarks/_search_landscape.SETUPS: 2048-token
answers, conf/search/eagle3_five.yaml, as search_efficiency searches it) and for each seed, the
model sampler runs its opening through the sweeper's loop (benchmarks/_search_arms: the longest
and the one-step chain, each screened with one run, with the launches' noise of
benchmarks/_search_sim) and then forecasts, as it does when it chooses its next launch:

- the optimum (the best configuration at fraction 0.85 without HiCache, the landscape's: a
  single stream's speed does not move with the fraction, and HiCache only slows it),
- the best chain,
- its own next proposal.

Each forecast is split the way the model builds it (sweep.study.model.predict): tau from the
acceptance part, the step t from the cost part, and the speed (`Knowledge.draws`: tau / t, a
screened configuration's draws anchored to its run). The truth is the simulator's noise-free
value: tau = 1 + sum of P(>=k), t = tau / speed. Per row, over the seeds: the medians of the
forecasts' medians, the median of where the truth falls in the draws (its percentile: 50 is
centred, under 2.5 or over 97.5 outside the 95% band) and how many 95% bands hold it. A second
table sets the cost part's terms after the opening (the posterior mean of c0 + c1 steps + c2 steps
x topk + c3 (draft - 1), sweep.study.model.cost; the median over seeds) beside the simulator's
(least squares over every configuration's noise-free step). A third sets each screened chain's
step (tau / speed of its one run) against the truth beside the relative standard error the cost
fit weighs it with (a screen has no interval of its own: the run noise). SIMULATED: it shows
what two chains tell the model about one model of the hardware, not the hardware.

    python benchmarks/opening_forecast.py [--seeds 20] [--setups h100_sxm,h200_nvlink,...]
    python benchmarks/opening_forecast.py --smoke   # CI: one box, two seeds

The full form writes docs/results/opening_forecast.md and benchmarks/out/opening_forecast.json.
Exit 1 when an opening did not measure two chains or left the model unable to predict.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import optuna
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import add_smoke_flag, output_path, write_json, write_results  # noqa: E402
from benchmarks._search_arms import _loop, objective_for  # noqa: E402
from benchmarks._search_landscape import SETUPS, Landscape, Oracle  # noqa: E402
from benchmarks._search_sim import Simulation, launch_tokens  # noqa: E402
from sweep.study.model.predict import Config, configurations  # noqa: E402
from sweep.study.model.sampler import ModelSampler  # noqa: E402
from sweep.study.model.watch import ModelWatch  # noqa: E402
from sweep.study.search import memory  # noqa: E402
from sweep.study.search.space import SearchSpace  # noqa: E402

MEMORY = {"mem_fraction_static": 0.85, "hicache_size": 0}
OPENING = 2  # launches: the two chains
DRAWS = 4000
PARTS = ("tau", "step_ms", "tok_s")
TERMS = ("c0", "c1 steps", "c2 steps x topk", "c3 (draft - 1)")


def truth(land: Landscape, config: Config) -> dict[str, float]:
    """The simulator's noise-free tau, step (ms) and tok/s of `config` at MEMORY."""
    values = config.values() | MEMORY
    speed = land.true_value(values)
    assert speed is not None, f"{config.label()} does not start at {MEMORY}"
    tau = 1 + sum(land.oracle.at_least(values, launch_tokens("single")))
    return {"tau": tau, "step_ms": 1000 * tau / speed, "tok_s": speed}


def true_terms(land: Landscape, space: SearchSpace) -> tuple[list[float], float]:
    """The simulator's step as the model's line (ms): least squares over every configuration's
    noise-free step, and the line's largest relative miss."""
    rows, steps = [], []
    for config in configurations(space, ()):
        s, k, d = config.shape
        rows.append([1.0, s, s * k, d - 1])
        steps.append(truth(land, config)["step_ms"])
    x, t = np.array(rows), np.array(steps)
    terms = np.linalg.lstsq(x, t, rcond=None)[0]
    return [float(c) for c in terms], float(np.abs(x @ terms / t - 1).max())


def forecast(state, config: Config) -> dict[str, np.ndarray]:
    """The model's draws of each part for `config`, as it has them when it proposes."""
    predictor = state.predictor
    model = predictor.acceptance[(1, config.drafter)]
    rates, rho = model.rate_samples(DRAWS), model.rho_samples(DRAWS)
    return {
        "tau": model.tau_samples(config.shape, rates, rho),
        "step_ms": 1000 * predictor.cost_samples(1, [config], n=DRAWS)[:, 0],
        "tok_s": state.draws([config])[:, 0],
    }


def one_opening(name: str, seed: int, space: SearchSpace) -> dict:
    """The opening on `name`'s box with `seed`, and the model's forecasts after it."""
    land = Landscape("single", Oracle(SETUPS[name]))
    objective = objective_for("single")
    sampler = ModelSampler(space, objective, seed=seed)
    study = optuna.create_study(
        sampler=memory.wrap(sampler, "auto", objective), directions=objective.directions
    )
    _loop(
        study, Simulation(land, float("inf"), random.Random(seed)), objective, space, OPENING, None
    )
    opened = [t.user_attrs.get("candidate") or {} for t in study.trials]
    if len(opened) != OPENING or any(c.get("topk") != 1 for c in opened):
        raise SystemExit(f"{name} seed {seed}: the opening launched {opened}, not two chains")
    others = ModelWatch(space, objective).others(study)
    state = sampler.state(study.get_trials(deepcopy=False), others, len(study.trials))
    if state.predictor is None or not state.predictor.ready:
        raise SystemExit(f"{name} seed {seed}: the model cannot predict after its opening")
    held = tuple((n, space.params[n].choices[0]) for n in others)
    every = [Config(c.shape, held) for c in configurations(space, ())]
    true_speed = {c: land.true_value(c.values() | MEMORY) or 0.0 for c in every}
    chains = [c for c in every if c.shape[1] == 1]
    proposal = sampler.propose(study, len(study.trials), others)
    assert proposal is not None, "nothing left to propose after two launches"
    roles = {
        "optimum": max(every, key=true_speed.__getitem__),
        "best chain": max(chains, key=true_speed.__getitem__),
        "next proposal": proposal.config,
    }
    forecasts = {}
    for role, config in roles.items():
        draws, true = forecast(state, config), truth(land, config)
        forecasts[role] = {"configuration": config.label(), "true": true} | {
            part: {
                "median": float(np.median(draws[part])),
                "low": float(np.percentile(draws[part], 2.5)),
                "high": float(np.percentile(draws[part], 97.5)),
                "truth_percentile": float(100 * (draws[part] < true[part]).mean()),
            }
            for part in PARTS
        }
    forecasts["next proposal"]["screen"] = proposal.screen
    forecasts["next proposal"]["of_optimum"] = true_speed[proposal.config] / max(
        true_speed.values()
    )
    predictor = state.predictor
    terms = predictor.cost[1].coefficients(DRAWS).mean(axis=0)[: len(TERMS)]
    # each screened chain's step (tau / speed of its one run) against the truth, and the relative
    # standard error the cost fit weighs it with (a screen has no interval: the run noise)
    screened = []
    for o in predictor.observations:
        measured_ms = 1000 * o.levels[1].tau / o.levels[1].decode
        true_ms = truth(land, Config(o.shape))["step_ms"]
        screened.append(
            {
                "configuration": Config(o.shape).label(),
                "off_by": measured_ms / true_ms - 1,
                "weighed_as": predictor.noise,
            }
        )
    return {
        "forecasts": forecasts,
        "terms_ms": [float(1000 * c) for c in terms],
        "screened_steps": screened,
    }


def summarize(name: str, seeds: list[dict]) -> list[dict]:
    """One row per role over the seeds (the next proposal's configuration: the most common)."""
    out = []
    for role in seeds[0]["forecasts"]:
        rows = [s["forecasts"][role] for s in seeds]
        labels = Counter(r["configuration"] for r in rows)
        label, n = labels.most_common(1)[0]
        summary = {"box": name, "role": role, "configuration": label, "share": n / len(rows)}
        for part in PARTS:
            pct = [r[part]["truth_percentile"] for r in rows]
            summary[part] = {
                "forecast": statistics.median(r[part]["median"] for r in rows),
                "true": statistics.median(r["true"][part] for r in rows),
                "truth_percentile": statistics.median(pct),
                "held": sum(2.5 <= p <= 97.5 for p in pct),
            }
        if role == "next proposal":
            summary["of_optimum"] = statistics.median(r["of_optimum"] for r in rows)
            summary["screened"] = sum(r["screen"] for r in rows)
        out.append(summary)
    return out


def new_table(title: str, labels: tuple[str, ...], numbers: tuple[str, ...]) -> Table:
    """A table of label columns, then right-justified number columns."""
    t = Table(title=f"SIMULATED: {title}")
    for name in labels:
        t.add_column(name)
    for name in numbers:
        t.add_column(name, justify="right")
    return t


def table(summaries: list[dict], seeds: int) -> Table:
    t = new_table(
        f"the model's forecasts after its opening, single stream, {seeds} seeds",
        ("box", "configuration"),
        (
            "tau",
            "step ms",
            "tok/s",
            "truth's percentile (tau, step, tok/s)",
            "95% bands holding it",
        ),
    )
    for s in summaries:
        label = f"{s['role']}: {s['configuration']}"
        if s["role"] == "next proposal":
            share = f"{100 * s['share']:.0f}% of seeds"
            label += f" ({share}; {s['of_optimum']:.2f}x the optimum)"
        digits = {p: 1 if p == "tok_s" else 2 for p in PARTS}
        cells = [f"{s[p]['forecast']:.{digits[p]}f} / {s[p]['true']:.{digits[p]}f}" for p in PARTS]
        pct = ", ".join(f"{s[p]['truth_percentile']:.0f}" for p in PARTS)
        held = ", ".join(f"{s[p]['held']}" for p in PARTS)
        t.add_row(s["box"], label, *cells, pct, held)
    return t


def terms_table(terms: dict[str, dict], seeds: int) -> Table:
    t = new_table(
        f"the step's terms after the opening (ms), the model's median of {seeds} seeds against "
        "the simulator's",
        ("box", "whose"),
        (*TERMS, "c1 + c2 + c3"),
    )
    for box, row in terms.items():
        for whose, values in (("model", row["model"]), ("simulator", row["simulator"])):
            label = whose
            if whose == "simulator":
                label += f" (line within {100 * row['misfit']:.1f}%)"
            cells = [f"{v:.3f}" for v in values] + [f"{sum(values[1:]):.3f}"]
            t.add_row(box, label, *cells)
    return t


def screens_table(screens: dict[str, dict], seeds: int) -> Table:
    t = new_table(
        f"the opening's screened steps against the truth, {seeds} seeds, and the relative "
        "standard error the cost fit weighs them with",
        ("box",),
        ("step measured / true - 1: RMS [90th percentile of |x|]", "weighed as (median)"),
    )
    for box, row in screens.items():
        t.add_row(
            box,
            f"{100 * row['rms']:.2f}% [{100 * row['p90']:.2f}%]",
            f"{100 * row['weighed_as']:.1f}%",
        )
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/opening_forecast.json")
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.setups = 2, "rtx_pro_6000_pcie"
    unknown = [n for n in args.setups.split(",") if n not in SETUPS]
    if unknown:
        parser.error(f"--setups: unknown {', '.join(unknown)}; the boxes are {', '.join(SETUPS)}")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    space = SearchSpace.from_config(OmegaConf.load(ROOT / "conf/search/eagle3_five.yaml").space)
    print(
        "SIMULATED: single-stream tok/s at 2048 tokens; per seed the model's opening (two chains,"
        " one run each), then its forecasts against the simulator's noise-free values"
    )
    report: dict = {"seeds": args.seeds, "memory": MEMORY, "boxes": {}}
    summaries, terms, screens = [], {}, {}
    for name in args.setups.split(","):
        seeds = [one_opening(name, seed, space) for seed in range(args.seeds)]
        report["boxes"][name] = seeds
        summaries += summarize(name, seeds)
        simulator, misfit = true_terms(Landscape("single", Oracle(SETUPS[name])), space)
        model = [statistics.median(s["terms_ms"][i] for s in seeds) for i in range(len(TERMS))]
        terms[name] = {"model": model, "simulator": simulator, "misfit": misfit}
        off = [abs(x["off_by"]) for s in seeds for x in s["screened_steps"]]
        screens[name] = {
            "rms": float(np.sqrt(np.mean(np.square(off)))),
            "p90": float(np.percentile(off, 90)),
            "weighed_as": statistics.median(
                x["weighed_as"] for s in seeds for x in s["screened_steps"]
            ),
        }
    result, split = table(summaries, args.seeds), terms_table(terms, args.seeds)
    weighed = screens_table(screens, args.seeds)
    for shown in (result, split, weighed):
        Console(width=200).print(shown)
    note = (
        "forecast / true: the median over seeds of the forecast's median, and the truth; a "
        "percentile is where the truth falls in the model's draws (50: centred)."
    )
    write_results(
        "opening_forecast",
        [result, split, weighed],
        simulated=True,
        smoke=args.smoke,
        notes=(note,),
    )
    report["summary"], report["terms_ms"], report["screened_steps"] = summaries, terms, screens
    write_json(output_path(args.json, args.smoke), report, "opening_forecast")


if __name__ == "__main__":
    main()
