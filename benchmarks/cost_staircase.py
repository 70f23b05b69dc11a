"""Does the model's cost part predict held-out launches where the CUDA-graph staircase matters?

A landscape where it does: the load profile (1, 8, 32, 64 in flight, weighted output
throughput) on the seeds' box (8x RTX PRO 6000 PCIe, Kimi-K2.5, the 37K drafter) with
2048-token answers (ignore_eos: every request holds its whole length in the KV pool) at
mem_fraction_static 0.82-0.85, where the pool admits 33 to 48 of the 64 requests. SGLang 0.5.23
pads a step's requests to the next captured batch size (harness.sglang.graphs: 33 and 39
replay the graph of 40), so launches at the same level run different padded batches. Each
launch is the simulator's engine on an instant clock (`harness.sim.oracle.
modelled_steady_state`, the steady-state benchmark's window), and reports what SGLang reports:
per level the output tok/s, the accept length and the decode lines' mean #running-req and
#queue-req, and the decode batch sizes it captured (/get_server_info `decode_cuda_graph_bs`).
Speeds get 2% run noise (seeded), as a measured launch's.

Per split, the model is fitted to `--train` launches and predicts every other launch's seconds
per verify step and stream (t = tau / output tok/s) at each level, in four forms: `line`
(`cost.features` without padding, c0..c3 per level fitted to t: the form before the staircase),
`per request` (the same line fitted to the step, t times the requests a step ran, and divided by
the held-out launch's requests: its requests known, its padded batch not), `per bucket` (that,
plus a free offset per padded batch the fitted launches ran) and `staircase` (the model's form:
`predict.Predictor.cost_samples` at the held-out launch's reported load, the padded batch in).
The error is against the launch's noise-free t. SIMULATED: it compares the forms on one model of
the hardware, not the hardware.

    python benchmarks/cost_staircase.py [--launches 40] [--train 12] [--splits 30] [--seed 0]
    python benchmarks/cost_staircase.py --smoke   # CI: a few launches, two splits

The full form writes docs/results/cost_staircase.md. Exit 1 when a launch did not start, a
launch reported no captured sizes, or the top level's launches all ran one padded batch (then
the landscape does not have the staircase this measures).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf
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
from benchmarks._search_landscape import PROMPT, SETUPS, effective, server_for  # noqa: E402
from harness.server.command import server_flags  # noqa: E402
from harness.sglang.graphs import padded_batch  # noqa: E402
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS  # noqa: E402
from harness.sim.cli import build_parser, resolve, sglang_version_of  # noqa: E402
from harness.sim.model.profiles import HARDWARE, TARGETS  # noqa: E402
from harness.sim.oracle import modelled_steady_state  # noqa: E402
from sweep.study.model.cost import LINE_TERMS, CostModel, CostPoint, features  # noqa: E402
from sweep.study.model.observations import Level, Observation  # noqa: E402
from sweep.study.model.predict import (  # noqa: E402
    Config,
    Load,
    Predictor,
    Target,
    configurations,
)
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace  # noqa: E402

STEM = "cost_staircase"
LEVELS = (1, 8, 32, 64)
TOKENS = 2048
FRACTIONS = (0.82, 0.83, 0.84, 0.85)
NOISE = 0.02  # a run's relative spread on the seeds' box (benchmarks/_search_sim)
SETUP = SETUPS["rtx_pro_6000_pcie"]


def launch(shape: tuple[int, int, int], fraction: float, number: int, rng: random.Random):
    """One simulated launch: (the observation as the harness records it, the true t per level)."""
    values = effective(
        {STEPS: shape[0], TOPK: shape[1], DRAFT: shape[2], "mem_fraction_static": fraction}
        | {"hicache_size": 0}
    )
    argv = [*server_flags(server_for(values, SETUP)), *SETUP.sim_flags()]
    argv += ["--stream-interval", "16"]
    ns = build_parser(sglang_version_of(argv)).parse_args(argv)
    hw, target = HARDWARE[ns.sim_hardware], TARGETS[ns.sim_target]
    args = resolve(ns, target.architecture, hw.gpu_memory_mib).args
    levels, truth = {}, {}
    for c in LEVELS:
        prompts = [f"{PROMPT}#{i}" for i in range(3 * c + 32)]
        r = modelled_steady_state(argv, c, prompts, TOKENS, max(c, 16), ignore_eos=True)
        output = r.output_tok_s * (1 + NOISE * rng.gauss(0.0, 1.0))
        levels[c] = Level(
            tau=r.accept_len,
            decode=None,
            decode_ci=None,
            output=output,
            output_ci=1.96 * NOISE * output,
            runs=3,
            running=r.running,
            queue=r.queued,
        )
        truth[c] = r.accept_len / r.output_tok_s
    obs = Observation(
        number=number,
        steps=values[STEPS],
        topk=values[TOPK],
        draft=values[DRAFT],
        others=(),
        drafter=None,
        levels=levels,
        graph_bs=tuple(args["sim_graph_bs"]),  # what /get_server_info reports
        max_running=args["max_running_requests"],
    )
    return obs, truth


def line_predictions(
    train: list[Observation], held: list[Observation], c: int, seed: int, per_request: bool
) -> np.ndarray:
    """The line c0..c3 at level `c`, fitted to t (the form before the staircase) or, with
    `per_request`, to the step (t times the requests a step ran) and divided by the held-out
    launch's requests: the padded batch left out."""

    def requests(o: Observation) -> float:
        return Load.of(o, c).batch if per_request else 1.0

    points = []
    for o in train:
        lv = o.levels[c]
        points.append(CostPoint(features(o.shape, (), []), lv.tau / lv.output * requests(o), NOISE))
    model = CostModel(points, np.random.default_rng(seed), LINE_TERMS)
    rows = np.array([features(o.shape, (), []) for o in held])
    return model.samples(rows, 256).mean(axis=0) / np.array([requests(o) for o in held])


def bucket_predictions(
    train: list[Observation], held: list[Observation], c: int, seed: int
) -> np.ndarray:
    """The line plus a free offset per padded batch the fitted launches ran at level `c` (the
    first one's is 0), fitted to the step and divided by the held-out launch's requests: a cost
    per captured bucket."""
    buckets = sorted({Load.of(o, c).padded for o in train})

    def row(o: Observation) -> list[float]:
        padded = Load.of(o, c).padded
        return features(o.shape, (), []) + [float(padded == b) for b in buckets[1:]]

    points = []
    for o in train:
        lv = o.levels[c]
        points.append(CostPoint(row(o), lv.tau / lv.output * Load.of(o, c).batch, NOISE))
    model = CostModel(points, np.random.default_rng(seed), LINE_TERMS)
    rows = np.array([row(o) for o in held])
    return model.samples(rows, 256).mean(axis=0) / np.array([Load.of(o, c).batch for o in held])


def staircase_predictions(predictor: Predictor, held: list[Observation], c: int) -> np.ndarray:
    configs = [Config(o.shape) for o in held]
    return predictor.cost_samples(c, configs, [Load.of(o, c) for o in held]).mean(axis=0)


FORMS = ("line", "per request", "per bucket", "staircase")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=40)
    parser.add_argument("--train", type=int, default=12)
    parser.add_argument("--splits", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/out/cost_staircase.json")
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        args.launches, args.train, args.splits = 8, 5, 2
    rng = random.Random(args.seed)
    space = SearchSpace.from_config(OmegaConf.load(ROOT / "conf/search/eagle3_five.yaml").space)
    shapes = sorted({cf.shape for cf in configurations(space, ())})
    # chains first as a study opens with them, then drawn configurations, each at a drawn fraction
    chosen = [(5, 1, 6), (1, 1, 2), *rng.sample(shapes, args.launches - 2)]
    launches, truths, failures = [], [], []
    for i, shape in enumerate(chosen):
        fraction = FRACTIONS[i % len(FRACTIONS)]
        obs, truth = launch(shape, fraction, i, rng)
        launches.append(obs)
        truths.append(truth)
        if not obs.graph_bs:
            failures.append(f"launch {i} reported no captured batch sizes")
        print(
            f"launch {i}: {shape} at {fraction}: running "
            + ", ".join(f"{c}: {obs.levels[c].running:.1f}" for c in LEVELS)
        )
    top = max(LEVELS)
    padded_top = sorted({Load.of(o, top).padded for o in launches})
    if len(padded_top) < 2:
        failures.append(f"every launch ran one padded batch at {top} in flight: no staircase")
    target = Target(LEVELS, (1.0,) * len(LEVELS), "output")
    errors: dict[str, dict[int, list[float]]] = {form: {} for form in FORMS}
    objective_errors: dict[str, list[float]] = {form: [] for form in FORMS}
    for split in range(args.splits):
        order = random.Random(args.seed * 1000 + split).sample(range(len(launches)), len(launches))
        # a study's first two launches are its opening chains; the rest drawn
        train_ids = [0, 1, *[i for i in order if i > 1][: args.train - 2]]
        train = [launches[i] for i in train_ids]
        held_ids = [i for i in range(len(launches)) if i not in train_ids]
        held = [launches[i] for i in held_ids]
        predictor = Predictor(train, target, space, seed=split)
        speeds = {form: np.zeros(len(held)) for form in FORMS}
        true_speed = np.zeros(len(held))
        for c in LEVELS:
            true_t = np.array([truths[i][c] for i in held_ids])
            tau = np.array([o.levels[c].tau for o in held])
            predicted = {
                "line": line_predictions(train, held, c, split, per_request=False),
                "per request": line_predictions(train, held, c, split, per_request=True),
                "per bucket": bucket_predictions(train, held, c, split),
                "staircase": staircase_predictions(predictor, held, c),
            }
            for form, pred in predicted.items():
                errors[form].setdefault(c, []).extend(np.abs(pred - true_t) / true_t)
                speeds[form] += tau / pred / len(LEVELS)
            true_speed += tau / true_t / len(LEVELS)
        for form in FORMS:
            objective_errors[form].extend(np.abs(speeds[form] - true_speed) / true_speed)
    table = Table(
        title=(
            f"SIMULATED: error of the predicted seconds per step and stream on held-out launches "
            f"({args.splits} splits, {args.train} launches fitted of {len(launches)})"
        )
    )
    table.add_column("level", justify="right")
    table.add_column("padded batches run", justify="right")
    for form in FORMS:
        table.add_column(f"{form}: median (p90)", justify="right")
    report: dict = {"levels": {}, "failures": failures}

    def cells(values: dict[str, list[float]]) -> tuple[list[str], dict]:
        out, numbers = [], {}
        for form in FORMS:
            v = np.array(values[form])
            numbers[form] = [float(np.median(v)), float(np.percentile(v, 90))]
            out.append(f"{100 * numbers[form][0]:.1f}% ({100 * numbers[form][1]:.1f}%)")
        return out, numbers

    for c in LEVELS:
        ran = sorted({int(Load.of(o, c).padded) for o in launches})
        row, numbers = cells({form: errors[form][c] for form in FORMS})
        table.add_row(str(c), ", ".join(map(str, ran)), *row)
        report["levels"][c] = {"padded": ran, **numbers}
    row, numbers = cells(objective_errors)
    table.add_row("objective", "", *row)
    report["objective"] = numbers
    Console().print(table)
    notes = (
        f"Landscape: {SETUP.name}, Kimi-K2.5 with the 37K drafter, levels {LEVELS}, "
        f"{TOKENS}-token answers (ignore_eos), mem_fraction_static {FRACTIONS} in turn, "
        f"request cap {SPEC_MAX_RUNNING_REQUESTS}; {NOISE:.0%} run noise on the speeds; "
        f"seed {args.seed}. The objective row: weighted output throughput with the launch's "
        "measured accept length, so only the cost part differs.",
        "Padded batches run: the CUDA-graph batch each launch's mean requests per step pads to "
        f"(e.g. {padded_batch(33, launches[0].graph_bs)} for 33 requests).",
    )
    write_json(output_path(args.json, args.smoke), report, STEM)
    write_results(STEM, [table], simulated=True, smoke=args.smoke, notes=notes)
    for failure in failures:
        print(f"FAILED: {failure}")
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
