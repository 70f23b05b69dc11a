"""Paired comparisons between the trials of a study without a baseline (the capacity presets).

A capacity study's trials all serve without speculation, so "× baseline" means nothing there; what
the user asks is "how much did this knob buy?". Two answers, both run for run: run r of every
trial sent the same prompts (harness.measure.prompt_plan), so `harness.record.stats.paired_ratio`
cancels the prompt-to-prompt variance that both share, which is most of it under load (multi-turn
chat's runs differ by ±10% while one configuration's change is a few percent):

- against the reference (`search.reference`, the parameters of the trial everything is compared
  to; the capacity presets use the seeds' starting point, 0.85 without HiCache);
- one knob at a time: every pair of measured trials that differ in exactly one searched parameter
  (0.85 without and with HiCache 48 is HiCache's effect at that pool).

Each is "measured" only when its paired 95% interval excludes 1x.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.record import labels
from harness.record.results import Outcome, TrialResult
from harness.record.stats import Ratio, paired_ratio
from sweep.readout.ranking import Ranking
from sweep.readout.verdict import ratio_interval

MAX_PAIR_LINES = 6  # the console's share; the summary JSON keeps every pair


@dataclass(frozen=True)
class Comparison:
    trial: str
    against: str
    ratio: Ratio  # trial / against, per run, paired
    knob: str | None = None  # the one parameter they differ in (None: against the reference)
    change: str = ""  # "hicache_size 0 -> 48"
    held: str = ""  # what both share, "mem_fraction_static 0.85"
    # TTFT p99 at the same level, trial / against, paired (HiCache's gain is mostly here)
    ttft_p99: Ratio | None = None

    @property
    def bounded(self) -> bool:
        return _bounded(self.ratio)

    @property
    def verdict(self) -> str:
        if not self.bounded:
            return "no interval (too few runs, or runs too spread, to bound it)"
        if self.ratio.low > 1:
            return "higher beyond its 95% interval"
        if self.ratio.high < 1:
            return "lower beyond its 95% interval"
        return "the interval includes 1×: not measurable with these runs"

    def as_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial,
            "against": self.against,
            "knob": self.knob,
            "change": self.change,
            "held": self.held,
            "ratio": self.ratio.value,
            "ci95_low": self.ratio.low if self.bounded else None,
            "ci95_high": self.ratio.high if self.bounded else None,
            "pairs": self.ratio.pairs,
            "ttft_p99_ratio": self.ttft_p99.value if self.ttft_p99 else None,
            "ttft_p99_ci95_low": self.ttft_p99.low if _bounded(self.ttft_p99) else None,
            "ttft_p99_ci95_high": self.ttft_p99.high if _bounded(self.ttft_p99) else None,
        }


def _bounded(ratio: Ratio | None) -> bool:
    return ratio is not None and math.isfinite(ratio.low) and math.isfinite(ratio.high)


def ttft_p99_runs(result: TrialResult, ranking: Ranking) -> dict[int, float]:
    """Run number -> TTFT p99 (s) of the complete runs at the ranking's level (1: single stream)."""
    level = ranking.level or 1
    return {
        r.run: r.ttft_p["p99"]
        for r in result.runs
        if r.concurrency == level and not r.incomplete and r.ttft_p.get("p99")
    }


def _paired(high: TrialResult, low: TrialResult, ranking: Ranking) -> tuple[Ratio, Ratio | None]:
    ttft = paired_ratio(ttft_p99_runs(high, ranking), ttft_p99_runs(low, ranking))
    found = ttft if math.isfinite(ttft.value) else None
    return paired_ratio(ranking.runs(high), ranking.runs(low)), found


def check_reference(reference: Mapping[str, Any] | None, space: Iterable[str]) -> dict[str, Any]:
    """`search.reference` as a dict, refused (ValueError) when it names a parameter the study does
    not search: a reference no trial can match would compare nothing, silently."""
    if reference is None:
        return {}
    if not isinstance(reference, Mapping):
        raise ValueError(
            f"search.reference={reference!r}: name the reference trial by its searched "
            "parameters, e.g. +search.reference.mem_fraction_static=0.85 (Hydra's + adds a key)."
        )
    found = dict(reference)
    names = set(space)
    unknown = sorted(set(found) - names)
    if unknown:
        raise ValueError(
            f"search.reference.{unknown[0]}: not a searched parameter (search.space has "
            f"{', '.join(sorted(names)) or 'none'}); name the reference by searched parameters "
            "only, or set search.reference={} to compare nothing."
        )
    for name, value in found.items():
        if not isinstance(value, (int, float, str, bool)) and value is not None:
            raise ValueError(
                f"search.reference.{name}={value!r}: one value (a number, a string or null), "
                "the value the reference trial runs with."
            )
    return found


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) < 1e-9
        except (TypeError, ValueError):
            return False
    return a == b


def _measured(results: list[TrialResult], ranking: Ranking) -> list[TrialResult]:
    return [
        r
        for r in results
        if r.outcome in (Outcome.OK, Outcome.PRUNED) and ranking.value(r) is not None
    ]


def reference_trial(
    results: list[TrialResult], reference: Mapping[str, Any], ranking: Ranking
) -> TrialResult | None:
    """The first measured trial whose parameters are the reference's."""
    if not reference:
        return None
    for r in _measured(results, ranking):
        if all(_same(r.params.get(k), v) for k, v in reference.items()):
            return r
    return None


def against_reference(
    results: list[TrialResult], reference: TrialResult, ranking: Ranking
) -> list[Comparison]:
    found = []
    for r in _measured(results, ranking):
        if r is not reference:
            ratio, ttft = _paired(r, reference, ranking)
            found.append(Comparison(r.name, reference.name, ratio, ttft_p99=ttft))
    return found


def one_knob_pairs(
    results: list[TrialResult], knobs: Iterable[str], ranking: Ranking
) -> list[Comparison]:
    """Every pair of measured trials equal in all searched parameters but one, as
    higher-value / lower-value of that one (numbers) or later / earlier trial (choices)."""
    knobs = sorted(knobs)
    found = []
    for a, b in itertools.combinations(_measured(results, ranking), 2):
        differ = [k for k in knobs if not _same(a.params.get(k), b.params.get(k))]
        if len(differ) != 1:
            continue
        knob = differ[0]
        low, high = sorted((a, b), key=lambda r: _order(r.params.get(knob)))
        held = ", ".join(f"{k} {a.params.get(k)}" for k in knobs if k != knob)
        ratio, ttft = _paired(high, low, ranking)
        found.append(
            Comparison(
                high.name,
                low.name,
                ratio,
                knob=knob,
                change=f"{knob} {low.params.get(knob)} -> {high.params.get(knob)}",
                held=held,
                ttft_p99=ttft,
            )
        )
    return sorted(found, key=lambda c: (c.knob or "", c.held, c.change))


def _order(value: Any) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except (TypeError, ValueError):
        return (1, str(value))


def _ratio_text(c: Comparison) -> str:
    text = f"{c.ratio.value:.2f}×"
    if c.bounded:
        interval = ratio_interval(c.ratio.low, c.ratio.high)
        text += f" (95% interval {interval}, {c.ratio.pairs} pairs)"
    return text


def _ttft_text(ratio: Ratio | None) -> str:
    """The TTFT p99 clause of a comparison's line, e.g. `; TTFT p99 0.31× (95% interval
    0.20–0.48×), shorter beyond it` (lower is better)."""
    if ratio is None:
        return ""
    text = f"; TTFT p99 {ratio.value:.2f}×"
    if _bounded(ratio):
        text += f" (95% interval {ratio_interval(ratio.low, ratio.high)})"
        if ratio.high < 1:
            text += ", shorter beyond it"
        elif ratio.low > 1:
            text += ", longer beyond it"
    else:
        text += " (its runs vary too much to bound it)"
    return text


def lines(found: Comparisons, best: TrialResult | None, ranking: Ranking) -> list[str]:
    """The verdict's paired comparisons: the best trial against the reference, then each
    one-knob pair (at most MAX_PAIR_LINES)."""
    out = []
    reference, vs_reference, pairs = found.reference, found.vs_reference, found.pairs
    if reference is None and found.wanted:
        wanted = ", ".join(f"{k}={v}" for k, v in found.wanted.items())
        out.append(
            f"No measured trial has the reference's parameters ({wanted}): nothing is compared "
            "to it. Enqueue it first (search.enqueue) or change search.reference."
        )
    if reference is not None and best is not None:
        config = labels.config_text(reference.effective or reference.params)
        value = ranking.value(reference) or 0.0
        head = f"Against the reference {reference.name} ({config}, {value:.1f} {ranking.unit})"
        if best is reference:
            out.append(f"{head}: the reference is the best trial.")
        else:
            mine = next((c for c in vs_reference if c.trial == best.name), None)
            if mine is not None:
                out.append(
                    f"{head}: {best.name} {_ratio_text(mine)}, {mine.verdict}"
                    + _ttft_text(mine.ttft_p99)
                    + "."
                )
    if pairs:
        out.append("One knob at a time (run r of both sent the same prompts):")
        for c in pairs[:MAX_PAIR_LINES]:
            at = f" at {c.held}" if c.held else ""
            out.append(
                f"  {c.change}{at}: {_ratio_text(c)} ({c.trial} / {c.against}), {c.verdict}"
                + _ttft_text(c.ttft_p99)
            )
        if len(pairs) > MAX_PAIR_LINES:
            more = len(pairs) - MAX_PAIR_LINES
            out.append(f"  ... {more} more in the summary JSON (comparisons)")
    return out


@dataclass(frozen=True)
class Comparisons:
    """What a study without a baseline compares: its reference trial, every trial against it,
    and the one-knob pairs."""

    reference: TrialResult | None
    vs_reference: list[Comparison]
    pairs: list[Comparison]
    wanted: dict[str, Any]  # search.reference: the parameters the reference trial has

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference.name if self.reference is not None else None,
            "vs_reference": [c.as_dict() for c in self.vs_reference],
            "one_knob": [c.as_dict() for c in self.pairs],
        }


def compare(
    results: list[TrialResult],
    reference: Mapping[str, Any],
    knobs: Iterable[str],
    ranking: Ranking,
) -> Comparisons:
    ref = reference_trial(results, reference, ranking)
    vs = against_reference(results, ref, ranking) if ref is not None else []
    return Comparisons(ref, vs, one_knob_pairs(results, knobs, ranking), dict(reference))


def metrics(best: TrialResult | None, vs_reference: list[Comparison]) -> dict[str, float]:
    """The parent run's numbers: the best trial against the reference, with its interval."""
    mine = next((c for c in vs_reference if best is not None and c.trial == best.name), None)
    if mine is None:
        return {}
    found = {"best_vs_reference": mine.ratio.value}
    if mine.bounded:
        found["best_vs_reference_ci95_low"] = mine.ratio.low
        found["best_vs_reference_ci95_high"] = mine.ratio.high
    return found
