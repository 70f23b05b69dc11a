"""The worked example of docs/search.md: search.sampler=model on the seeds' box, step by step.

Runs the sweeper's loop in-process on the simulator's model of 8x RTX PRO 6000 PCIe with
Kimi-K2.5 and the 37K drafter (benchmarks/_search_landscape, single-stream tok/s at 2048 tokens,
the launches' noise as benchmarks/_search_sim draws it), with the model sampler and no priors,
and prints after each launch what was measured, what the model now predicts for the chains and
for a few trees against the simulator's true values, and what it proposes next and why.
SIMULATED: it shows how the model reasons, not what hardware does.

    python benchmarks/model_example.py [--launches 4] [--seed 0] [--setup rtx_pro_6000_pcie]
    python benchmarks/model_example.py --smoke   # CI: two launches

Every launch must have measured its configuration (exit 1 otherwise: none was). The full form writes
docs/results/model_example.md: each launch, and the last launch's predictions against the truth.
"""

from __future__ import annotations

import argparse
import random
import sys
import warnings
from pathlib import Path

import optuna
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.table import Table  # noqa: E402

from benchmarks._common import add_smoke_flag, write_results  # noqa: E402
from benchmarks._search_arms import _loop, objective_for  # noqa: E402
from benchmarks._search_landscape import SETUPS, Landscape, Oracle  # noqa: E402
from benchmarks._search_sim import Simulation  # noqa: E402
from sweep.study.model import observations  # noqa: E402
from sweep.study.model.predict import Config, Predictor, target_for  # noqa: E402
from sweep.study.model.sampler import ModelSampler  # noqa: E402
from sweep.study.search import memory  # noqa: E402
from sweep.study.search.space import SearchSpace  # noqa: E402

SHOWN = [(1, 1, 2), (2, 1, 3), (3, 1, 4), (4, 1, 5), (5, 1, 6), (2, 2, 4), (3, 4, 8), (4, 4, 16)]
MEMORY = {"mem_fraction_static": 0.85, "hicache_size": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setup", default="rtx_pro_6000_pcie", choices=sorted(SETUPS))
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.launches = min(args.launches, 2)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    base = OmegaConf.load(ROOT / "conf/search/eagle3_five.yaml")
    space = SearchSpace.from_config(base.space)
    land = Landscape("single", Oracle(SETUPS[args.setup]))
    objective = objective_for("single")
    sampler = ModelSampler(space, objective, seed=args.seed)
    study = optuna.create_study(
        sampler=memory.wrap(sampler, "auto", objective), directions=objective.directions
    )
    truth = {sh: land.true_value(Config(sh).values() | MEMORY) for sh in SHOWN}
    print(f"SIMULATED: {args.setup}, single-stream tok/s at 2048 tokens, model sampler, no priors")
    launches = Table(title=f"SIMULATED {args.setup}: each launch of the model sampler")
    for column in ("launch", "steps/topk/draft", "measured", "tok/s", "accept length", "next"):
        launches.add_column(
            column, justify="right" if column in ("tok/s", "accept length") else "left"
        )
    predictions = None
    for launch in range(1, args.launches + 1):  # one launch per loop: a fresh server each
        rng = random.Random(args.seed * 100 + launch)
        sim = Simulation(land, float("inf"), rng, prompt_seed=args.seed)  # one search's prompts
        _loop(study, sim, objective, space, 1, None)
        if not sim.starts:
            print("\nthe model's stopping rule ends the search here")
            break
        predictions = _report(study, sampler, space, objective, truth, launches) or predictions
    tables = [launches] + ([predictions] if predictions is not None else [])
    note = f"seed {args.seed}, {args.launches} launches at most, no priors; true = the simulator's."
    write_results("model_example", tables, simulated=True, smoke=args.smoke, notes=(note,))
    # a launch _report cannot find the measurement of raises there; none at all is caught here
    if not launches.row_count:
        raise SystemExit("no launch was measured")


def _report(study, sampler, space, objective, truth, launches: Table) -> Table | None:
    """Print what the launch measured and what the model now predicts and proposes; add the
    launch to `launches` and return the predictions as a table (None before the model is ready)."""
    last = study.trials[-1]
    cand = last.user_attrs["candidate"]
    shape = (cand["steps"], cand["topk"], cand["draft_tokens"])
    obs = observations.read(study.trials)
    level = next(o for o in obs if o.number == last.number).levels[1]
    kind = "screened, 1 run" if last.user_attrs.get("screened") else "in full"
    print(
        f"\nlaunch {last.number + 1}: {shape[0]}/{shape[1]}/{shape[2]} ({kind}): "
        f"{level.decode:.1f} tok/s, accept length {level.tau:.2f}, "
        f"P(>=k) {', '.join(f'{p:.3f}' for p in level.at_least)}"
    )
    row = [str(last.number + 1), "/".join(map(str, shape)), kind]
    row += [f"{level.decode:.1f}", f"{level.tau:.2f}"]
    target = target_for(objective)
    assert target is not None
    predictor = Predictor(obs, target, space, seed=0)
    if not predictor.ready:
        launches.add_row(*row, "-")
        return None
    predictions = Table(title=f"SIMULATED: the model's predictions after launch {last.number + 1}")
    for column in ("configuration", "predicted tau", "predicted tok/s [95%]", "true tok/s"):
        predictions.add_column(column, justify="right")
    configs = [Config(sh) for sh in SHOWN]
    mid, low, high = predictor.summary(configs)
    model = predictor.acceptance[(1, None)]
    rates, rho = model.rate_samples(256), model.rho_samples(256)
    print("  configuration  predicted tau  predicted tok/s [95%]   true tok/s")
    for i, cf in enumerate(configs):
        tau = model.tau_samples(cf.shape, rates, rho)
        print(
            f"  {cf.label():>13}  {tau.mean():13.2f}  {mid[i]:6.1f} [{low[i]:5.1f}, "
            f"{high[i]:5.1f}]   {truth[cf.shape]:8.1f}"
        )
        predictions.add_row(
            cf.label(),
            f"{tau.mean():.2f}",
            f"{mid[i]:.1f} [{low[i]:.1f}, {high[i]:.1f}]",
            f"{truth[cf.shape]:.1f}",
        )
    cost = predictor.cost[1]
    c0, c1, c2, c3 = (1000 * x for x in cost.coefficients(512).mean(axis=0)[:4])
    print(
        f"  ms per verify step (posterior mean): {c0:.2f} + {c1:.2f}*steps + {c2:.2f}*steps*topk"
        f" + {c3:.2f}*(draft-1); sibling factor {model.rho_mean:.2f}"
    )
    nxt = sampler.propose(study, len(study.trials))
    if nxt is None:
        launches.add_row(*row, "stop")
        return predictions
    why = nxt.reason
    if nxt.reason == "model":
        gain = "nothing measured in full yet" if nxt.gain is None else f"{nxt.gain:.2f} tok/s"
        why = (
            f"expected gain {gain} over {nxt.hours:.2f} GPU-h, predicted "
            f"{nxt.mean:.1f} [{nxt.low:.1f}, {nxt.high:.1f}]"
        )
    elif nxt.reason == "informative":  # a screen where it tells most, in place of the pick
        why = (
            f"the screen that tells most about the best, predicted {nxt.mean:.1f} "
            f"[{nxt.low:.1f}, {nxt.high:.1f}]; in place of {nxt.why_screened}"
        )
    print(f"  next: {nxt.config.label()} ({why})")
    launches.add_row(*row, f"{nxt.config.label()} ({why})")
    return predictions


if __name__ == "__main__":
    main()
