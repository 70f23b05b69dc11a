"""The baseline a deployment without speculation runs, level by level: what the study's answer
(the Best line, the trials table, the Deploy line) compares with.

With speculation SGLang runs at most 48 requests at once; without it, as many as the KV pool
admits. At a level above that cap the study's own baseline (given the trials' cap, so that both
servers queue the same requests) measures a server no deployment runs, and the per-level answer
already compares with the baseline at SGLang's own limit there (sweep.study.answer.levels). An
answer that aggregates the levels (a weighted load profile, or throughput at such a level) must do
the same, or it says "deploy" where every level above the cap says "off" (H200, weighted over
1/8/32/64: 1.11x against the equal-cap baseline, about 0.99x against the deployed one, with
0.88x at 64). This baseline is the study's own at and below the cap and the uncapped one above
it: run r at every level sent the same prompts in both (harness.measure.prompt_plan depends only
on the benchmark), so run r of the composite pairs with run r of every trial, as either does.
"""

from __future__ import annotations

import re
from dataclasses import replace

from harness.record.results import Outcome, TrialResult
from sweep.study.answer.equal_caps import cap_of

_LEVEL = re.compile(r"_c(\d+)(?:_ci95)?$")
# Aggregates over the levels, derived again from the composite's per-level values
# (sweep.study.trial.objective.Objective.derived) instead of kept from one of the two servers.
_AGGREGATES = ("weighted_throughput", "weighted_speed")


def levels_above(baseline: TrialResult | None, uncapped: TrialResult | None) -> list[int]:
    """The levels where the deployed baseline is the uncapped one; [] where it is the study's
    own everywhere (no uncapped baseline measured, or no level above the cap)."""
    if baseline is None or uncapped is None or baseline.outcome is not Outcome.OK:
        return []
    cap = cap_of(baseline)
    if uncapped.outcome is not Outcome.OK or cap is None:
        return []
    return sorted({r.concurrency for r in uncapped.runs if r.concurrency > cap})


def deployed_baseline(
    baseline: TrialResult | None, uncapped: TrialResult | None
) -> TrialResult | None:
    """`baseline` with every level above its cap taken from `uncapped` (metrics and runs)."""
    above = set(levels_above(baseline, uncapped))
    if not above or baseline is None or uncapped is None:
        return baseline

    def level(key: str) -> int | None:
        found = _LEVEL.search(key)
        return int(found.group(1)) if found else None

    kept = {
        key: value
        for key, value in baseline.metrics.items()
        if level(key) not in above and key.removesuffix("_ci95") not in _AGGREGATES
    }
    taken = {key: value for key, value in uncapped.metrics.items() if level(key) in above}
    runs = [r for r in baseline.runs if r.concurrency not in above]
    runs += [r for r in uncapped.runs if r.concurrency in above]
    return replace(baseline, metrics={**kept, **taken}, runs=runs)


def deployed_line(baseline: TrialResult | None, uncapped: TrialResult | None) -> str | None:
    """One line under the table where the answer's baseline is not the study's own everywhere."""
    above = levels_above(baseline, uncapped)
    if not above or baseline is None or uncapped is None:
        return None
    where = ", ".join(str(c) for c in above)
    return (
        f"The baseline the answer compares with: at {where} in flight the one at SGLang's own "
        f"running-request limit (what a deployment without speculation runs), at or below "
        f"{cap_of(baseline)} the study's own (baseline: {baseline.name}, {uncapped.name}); the "  # type: ignore[union-attr]
        "per-level table has the equal-cap comparison beside it."
    )
