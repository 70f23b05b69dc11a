"""The bar the default sampler is held to on search_efficiency's landscapes, and where it stands.

Each bar is a ratio of two arms' median GPU-hours to 2% of the optimum, read on every named
landscape with a paired bootstrap interval over seeds (the arms of one seed share its landscape
and noise), and on each family part as the median of its members' ratios with a bootstrap
interval over members:

- `model` / `opening+clairvoyant` at most 1.25: the model's own opening, then a clairvoyant's one
  launch, is the least a search that opens as the model does can spend;
- `model` / `tpe` at most 0.5 on single-stream objectives: Optuna's `TPESampler()` as shipped,
  what a user would pick instead;
- `model+priors` / `model` at most 1.05: the priors never cost much where they do not help.

A bar may name a floor of its arm: `priors+clairvoyant` (the priors measured as `model+priors`
measures them, in full, then a clairvoyant's one launch) is the least any proposer that
measures the priors in full can spend, so where `priors+clairvoyant` / `model` is above the
limit no such proposer meets the bar; the table says so beside the bar's cell ("blocked").
The TPE bar names `opening+clairvoyant`, the least a search that opens as the model does can
spend: where it is above 0.5x TPE, no such search meets that bar.

The floor bar's limit leaves a search a little beyond its floor; `room_rows` says how much in the
unit a model-based search spends it in, screens (one run per level, priced at the landscape's
answer), beside what the model spends beyond its floor in the same unit.

On each family part the model's worst decile (its 90th percentile of GPU-hours relative to the
best other arm, `_search_report.summarize_set`) must not exceed random's, and on a part of
memory-tight deployments every search of the model reaches 2% within the budget. A cell
"meets" when its point estimate is within the limit; the interval says how sure that is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.markup import escape
from rich.table import Table

from benchmarks._search_stats import bootstrap_ratio

Reached = tuple[int, float] | None


@dataclass(frozen=True)
class Bar:
    arm: str
    against: str
    limit: float
    single_only: bool = False  # read on single-stream landscapes only
    floor: str | None = None  # the least `arm` can spend (a reference arm), read against `against`

    @property
    def name(self) -> str:
        return f"{self.arm} / {self.against}"


BARS = (
    Bar("model", "opening+clairvoyant", 1.25),
    Bar("model", "tpe", 0.5, single_only=True, floor="opening+clairvoyant"),
    Bar("model+priors", "model", 1.05, floor="priors+clairvoyant"),
)
FLOOR_BAR = BARS[0]
MEMORY_TIGHT = "memory"  # a set whose name holds this is a memory-tight part


def _single(label: str) -> bool:
    return label.endswith(" single")


def landscape_ratios(label: str, runs: dict[str, list[Reached]]) -> dict[str, list[float]]:
    """Each bar's [point, low, high] on one landscape, where both of its arms ran."""
    out = {}
    for bar in BARS:
        missing = bar.arm not in runs or bar.against not in runs
        if missing or (bar.single_only and not _single(label)):
            continue
        gh = [[r and r[1] for r in runs[a]] for a in (bar.arm, bar.against)]
        out[bar.name] = list(bootstrap_ratio(*gh))
        if bar.floor in runs:
            floor = [r and r[1] for r in runs[bar.floor]]
            out[_floor_name(bar)] = list(bootstrap_ratio(floor, gh[1]))
    return out


def _floor_name(bar: Bar) -> str:
    return f"{bar.floor} / {bar.against}"


def _median_over_members(points: list[float], seed: int = 0) -> list[float]:
    """The median of the members' ratios and its bootstrap interval over members."""
    data = np.array(points, dtype=float)
    data = data[~np.isnan(data)]
    if data.size == 0:
        return [math.nan, math.nan, math.nan]
    rng = np.random.default_rng(seed)
    medians = np.median(data[rng.integers(0, data.size, size=(2000, data.size))], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5], method="inverted_cdf")
    return [float(np.median(data)), float(low), float(high)]


def rows(sets: dict) -> list[dict]:
    """Every cell of the bar: where it is read, what, the ratio with its interval, the limit."""
    out = []
    for name, s in sets.items():
        lands = s["landscapes"]
        if name == "profiles":
            for land in lands:
                for bar in BARS:
                    value = land.get("bar", {}).get(bar.name)
                    if value is not None:
                        out.append(_row(land["landscape"], bar.name, value, bar.limit))
                    floor = land.get("bar", {}).get(_floor_name(bar))
                    if value is not None and floor is not None:
                        out.append(_floor_row(land["landscape"], _floor_name(bar), floor, bar))
            continue
        for bar in BARS:
            points = [land["bar"][bar.name][0] for land in lands if bar.name in land.get("bar", {})]
            if points:
                where = f"{name}: median of {len(points)}"
                out.append(_row(where, bar.name, _median_over_members(points), bar.limit))
            floors = [
                land["bar"][_floor_name(bar)][0]
                for land in lands
                if bar.name in land.get("bar", {}) and _floor_name(bar) in land["bar"]
            ]
            if points and floors:
                where = f"{name}: median of {len(floors)}"
                floor = _median_over_members(floors)
                out.append(_floor_row(where, _floor_name(bar), floor, bar))
        deciles = s["summary"].get("arm_vs_best_other", {})
        if "model" in deciles and "random" in deciles:
            model, rand = deciles["model"]["worst_decile"], deciles["random"]["worst_decile"]
            out.append(
                {
                    "where": f"{name}: worst decile",
                    "bar": "model vs random (x best other)",
                    "value": f"{model:.2f} vs {rand:.2f}",
                    "limit": "<= random",
                    "meets": model <= rand,
                }
            )
        if MEMORY_TIGHT in name:
            reached = [r for land in lands for r in land["arms"] if r["arm"] == "model"]
            got, seeds = sum(r["reached"] for r in reached), sum(r["seeds"] for r in reached)
            out.append(
                {
                    "where": f"{name}: every search",
                    "bar": "model reaches 2% within the budget",
                    "value": f"{got}/{seeds}",
                    "limit": "all",
                    "meets": got == seeds,
                }
            )
    return out


def _row(where: str, bar: str, value: list[float], limit: float) -> dict:
    point, low, high = value
    return {
        "where": where,
        "bar": bar,
        "value": f"{_fmt(point)} [{_fmt(low)}, {_fmt(high)}]",
        "limit": f"<= {limit:g}",
        "meets": not math.isnan(point) and point <= limit,
    }


def _floor_row(where: str, name: str, value: list[float], bar: Bar) -> dict:
    """A bar's floor: "blocked" where even the floor is above the bar's limit (no proposer
    that spends what the floor must can meet it), else "reachable"."""
    row = _row(where, f"{name} (floor of {bar.arm})", value, bar.limit)
    point = value[0]
    row["status"] = "blocked" if not math.isnan(point) and point > bar.limit else "reachable"
    return row


def _fmt(v: float) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return "never" if math.isinf(v) else f"{v:.2f}"


def table(title: str, cells: list[dict]) -> Table:
    out = Table(title=title)
    for column, justify in (
        ("where", "left"),
        ("bar (GPU-hours to 2%)", "left"),
        ("ratio [95%]", "right"),
        ("limit", "right"),
        ("meets", "left"),
    ):
        out.add_column(column, justify=justify)  # type: ignore[arg-type]
    for c in cells:
        meets = c.get("status") or ("yes" if c["meets"] else "NO")
        out.add_row(c["where"], c["bar"], c["value"], c["limit"], meets)
    return out


def room_rows(sets: dict) -> list[dict]:
    """Per named landscape, and as the median of each family part's members: the floor's median
    GPU-hours, one screen's, the screens the floor bar's limit leaves beyond the floor
    ((limit - 1) x floor / screen) and the screens' worth the model spends beyond it. Read from
    the landscapes' `screen_gpu_hours` (a run with the reference arms records it)."""
    out = []
    for name, s in sets.items():
        members = [
            (land["landscape"], m) for land in s["landscapes"] if (m := _room(land)) is not None
        ]
        if not members:
            continue
        if name == "profiles":
            out += [{"where": where, **m} for where, m in members]
            continue
        keys = ("floor", "screen", "room", "spent")
        median = {k: float(np.median([m[k] for _, m in members])) for k in keys}
        out.append({"where": f"{name}: median of {len(members)}", **median})
    return out


def _room(land: dict) -> dict | None:
    screen = land.get("screen_gpu_hours")
    hours = {r["arm"]: r["gpu_hours"] for r in land["arms"]}
    floor, model = hours.get(FLOOR_BAR.against), hours.get(FLOOR_BAR.arm)
    if not screen or floor is None or model is None:
        return None
    return {
        "floor": floor,
        "screen": screen,
        "room": (FLOOR_BAR.limit - 1) * floor / screen,
        "spent": (model - floor) / screen,
    }


def room_table(title: str, cells: list[dict]) -> Table:
    out = Table(title=title)
    for column in (
        "where",
        f"{FLOOR_BAR.against} (GPU-h)",
        "one screen (GPU-h)",
        f"room in {FLOOR_BAR.limit:g}x (screens)",
        f"{FLOOR_BAR.arm} beyond its floor (screens)",
    ):
        out.add_column(column, justify="left" if column == "where" else "right")
    for c in cells:
        cols = (_fmt(c["floor"]), f"{c['screen']:.3f}", _fmt(c["room"]), _fmt(c["spent"]))
        out.add_row(c["where"], *cols)
    return out


def report_table(report: dict) -> Table:
    """Where the default sampler stands against its bar, every set of a run's report together."""
    return table(  # escaped: rich reads "[95%]" as a style tag and drops it
        f"SIMULATED: the model sampler against its bar, median GPU-hours to 2% over "
        f"{report['seeds']} seeds {escape('[95%]')}",
        rows(report["sets"]),
    )


def report_room_table(report: dict) -> Table | None:
    """The room the floor bar leaves, in screens (`room_rows`); None for a report without
    screen prices (a run without the reference arms)."""
    cells = room_rows(report["sets"])
    if not cells:
        return None
    return room_table(
        f"SIMULATED: screens the {FLOOR_BAR.limit:g}x floor bar leaves room for "
        f"(median GPU-hours over {report['seeds']} seeds)",
        cells,
    )


def report_tables(report: dict) -> list[Table]:
    """The bar, then the room its floor leaves where the run had the reference arms."""
    room = report_room_table(report)
    return [report_table(report)] + ([room] if room is not None else [])
