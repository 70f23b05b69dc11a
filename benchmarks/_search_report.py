"""What search_efficiency prints and writes: per landscape, every arm's medians with intervals;
per landscape set, specsweep against the strongest arm that is not specsweep.

"Best other arm" on a landscape is the arm that is not specsweep with the lowest median GPU-hours
(ties: fewer median launches). specsweep+priors is compared with the best of every other arm
(the priors included, since random+priors and tpe+priors are given them too); specsweep without
priors with the best other arm without priors. A ratio above 1 means specsweep needed more.
The reference arms (`clairvoyant`, `opening+clairvoyant`, `priors+clairvoyant`: floors that
know the landscape, not searches) are never the best other arm; they are compared as specsweep
without priors is (`priors+clairvoyant` as specsweep with them), so their ratio is the least a
search could read against the same opponent.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from benchmarks import _search_bar
from benchmarks._search_arms import ARMS, BY_NAME
from benchmarks._search_stats import bootstrap_median, bootstrap_ratio, median, quantile, ratio

Reached = tuple[int, float] | None  # (launches, GPU-hours) at 2%, None: censored
# specsweep's arms and whether each is compared with the arms given the priors too
OURS = (("specsweep+priors", True), ("specsweep", False), ("model+priors", True), ("model", False))
# the reference arms (floors), compared as specsweep's arm with or without the priors is
FLOORS = tuple((a.name, a.priors) for a in ARMS if a.reference)


def summarize_landscape(label: str, optimum: float, runs: dict[str, list[Reached]]) -> dict:
    rows = []
    for name, reached in runs.items():
        gh = [r and r[1] for r in reached]
        n = [r and r[0] for r in reached]
        rows.append(
            {
                "arm": name,
                "gpu_hours": median(gh),
                "gpu_hours_ci95": bootstrap_median(gh),
                "launches": median(n),
                "launches_ci95": bootstrap_median(n),
                "reached": sum(r is not None for r in reached),
                "seeds": len(reached),
            }
        )
    out = {"landscape": label, "optimum": round(optimum, 2), "arms": rows}
    out["verdict"] = verdict(runs, {r["arm"]: r for r in rows})
    out["bar"] = _search_bar.landscape_ratios(label, runs)
    return out


def _best_other(by: dict[str, dict], priors: bool) -> str | None:
    """The arm that is not specsweep with the lowest median GPU-hours, among those run on every
    seed (an arm given fewer, GPSampler where it is too slow, is shown but not chosen: the least
    median of a handful of seeds is a lucky one)."""
    seeds = max(r["seeds"] for r in by.values())
    others = [
        r
        for name, r in by.items()
        if not BY_NAME[name].specsweep
        and not BY_NAME[name].reference
        and (priors or not BY_NAME[name].priors)
        and r["seeds"] == seeds
    ]
    if not others:  # only specsweep's arms were run: nothing to compare with
        return None
    return min(others, key=lambda r: (r["gpu_hours"], r["launches"]))["arm"]


def verdict(runs: dict[str, list[Reached]], by: dict[str, dict]) -> dict:
    out = {}
    for ours, priors in OURS + FLOORS:
        if ours not in by:
            continue
        best = _best_other(by, priors)
        if best is None:
            continue
        gh = [[r and r[1] for r in runs[a]] for a in (ours, best)]
        point, low, high = bootstrap_ratio(*gh)
        out[ours] = {"best_other": best, "gpu_hours_ratio": point, "ci95": (low, high)}
    return out


def summarize_set(landscapes: list[dict]) -> dict:
    """Across a set of landscapes: per arm, the median and worst decile (90th percentile) of
    its median GPU-hours relative to the best other arm there; specsweep's two ratios likewise."""
    per_arm: dict[str, list[float]] = {}
    for land in landscapes:
        by = {r["arm"]: r for r in land["arms"]}
        other = _best_other(by, True)
        if other is None:
            continue
        best = by[other]["gpu_hours"]
        for name, r in by.items():
            per_arm.setdefault(name, []).append(ratio(r["gpu_hours"], best))
    out = {
        "landscapes": len(landscapes),
        "arm_vs_best_other": {
            name: {"median": quantile(v, 0.5), "worst_decile": quantile(v, 0.9)}
            for name, v in per_arm.items()
        },
    }
    for ours, _ in OURS + FLOORS:
        ratios = [
            land["verdict"][ours]["gpu_hours_ratio"]
            for land in landscapes
            if ours in land["verdict"]
        ]
        if ratios:
            out[ours] = {
                "median": quantile(ratios, 0.5),
                "worst_decile": quantile(ratios, 0.9),
                "best": quantile(ratios, 0.0),
                "above_1": sum(r > 1 for r in ratios if not math.isnan(r)),
            }
    return out


def jsonable(value):
    """inf (censored) as the string "never", nan (undetermined) as null: strict JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) else ("never" if math.isinf(value) else value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def fmt(v: float, digits: int = 2) -> str:
    if math.isnan(v):
        return "n/a"
    return "never" if math.isinf(v) else f"{v:.{digits}f}"


def interval(value: float, ci: tuple[float, float], digits: int = 2) -> str:
    return f"{fmt(value, digits)} [{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]"


def _console() -> Console:
    return Console(width=max(Console().width, 140))


def _landscape_cell(land: dict, row: int) -> str:
    if row == 0:
        return f"{land['landscape']}"
    if row == 1:
        return f"optimum {land['optimum']:.1f}"
    share = land.get("share_within_2pct")
    return f"{share:.1%} within 2%" if row == 2 and share is not None else ""


def print_landscapes(title: str, landscapes: list[dict]) -> Table:
    table = landscapes_table(title, landscapes)
    _console().print(table)
    for land in landscapes:
        for ours, v in land["verdict"].items():
            print(
                f"{land['landscape']}: {ours} / {v['best_other']} GPU-h = "
                f"{interval(v['gpu_hours_ratio'], v['ci95'])}"
            )
    return table


def landscapes_table(title: str, landscapes: list[dict]) -> Table:
    table = Table(title=title)
    for column in ("landscape", "arm", "GPU-h [95%]", "launches [95%]", "reached"):
        table.add_column(column, justify="left" if column in ("landscape", "arm") else "right")
    for land in landscapes:
        for i, r in enumerate(land["arms"]):
            table.add_row(
                _landscape_cell(land, i),
                r["arm"],
                interval(r["gpu_hours"], r["gpu_hours_ci95"]),
                interval(r["launches"], r["launches_ci95"], 1),
                f"{r['reached']}/{r['seeds']}",
            )
        table.add_section()
    return table


def set_table(title: str, summary: dict) -> Table:
    table = Table(title=title)
    for column in ("arm", "median vs best other", "worst decile vs best other"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for name, v in summary["arm_vs_best_other"].items():
        table.add_row(name, fmt(v["median"]), fmt(v["worst_decile"]))
    return table


def print_table(table: Table) -> None:
    _console().print(table)


def print_set(title: str, summary: dict) -> Table:
    table = set_table(title, summary)
    _console().print(table)
    given = dict(OURS + FLOORS)  # each arm: compared with the arms given the priors too
    for ours in ("specsweep+priors", "specsweep", "model+priors", "model", *dict(FLOORS)):
        if ours in summary:
            v = summary[ours]
            print(
                f"{ours} / best other arm{'' if given[ours] else ' without priors'}"
                f", GPU-h over {summary['landscapes']} landscapes: median {fmt(v['median'])}, "
                f"worst decile {fmt(v['worst_decile'])}, best {fmt(v['best'])}, "
                f"above 1x on {v['above_1']}"
            )
    return table


def print_arms(names: list[str]) -> None:
    print("What each arm is given:")
    for arm in ARMS:
        if arm.name in names:
            print(f"  {arm.name}: {arm.describe()}")
