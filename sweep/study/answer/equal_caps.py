"""Equal caps: whether the baseline ran with the speculative trials' max_running_requests.

SGLang resets an unset max_running_requests to 48 when speculation is on (0.5.23
`srt/arg_groups/speculative_hook.py`; harness.sglang.speculative.SPEC_MAX_RUNNING_REQUESTS) and
leaves the baseline's sized from its KV pool, so by default the baseline gets the same 48
(`search.baseline_equal_caps`, sweep.config.specs.build_server_spec). When the caps still differ
(the key off, or max_running_requests set or searched), the summary says so and by how much: above
the smaller cap the two servers queue differently and their throughputs are not comparable.
"""

from __future__ import annotations

from typing import Any

from harness.record.results import Outcome, TrialResult

UNCAPPED = "unset (SGLang sizes it from the KV pool)"


def cap_of(result: TrialResult) -> int | None:
    """What the server said it ran with, else what was asked for."""
    value = result.effective.get("max_running_requests", result.params.get("max_running_requests"))
    return int(value) if value is not None else None


def caps(results: list[TrialResult], baseline: TrialResult | None) -> dict[str, Any] | None:
    """{"baseline": cap, "trials": [distinct caps], "equal": bool}, None without a baseline or
    a measured trial."""
    measured = [r for r in results if r.outcome in (Outcome.OK, Outcome.PRUNED)]
    if baseline is None or not measured:
        return None
    base = cap_of(baseline)
    trials = sorted({cap_of(r) for r in measured}, key=lambda c: (c is None, c or 0))
    return {"baseline": base, "trials": trials, "equal": trials == [base]}


def caps_line(info: dict[str, Any] | None) -> str | None:
    """A plain sentence when the caps differ, None when they are equal (or unknown)."""
    if info is None or info["equal"]:
        return None
    base = info["baseline"]

    def differ(cap: int | None) -> str:
        if cap is None:
            return f"{UNCAPPED}"
        if base is None:
            return f"{cap} (the baseline has no such cap)"
        return f"{cap} ({cap - base:+d})"

    trials = ", ".join(differ(c) for c in info["trials"] if c != base)
    return (
        "max_running_requests differs: the baseline ran with "
        f"{base if base is not None else UNCAPPED}, trials with {trials}; above the smaller cap "
        "the speedups compare different queueing (search.baseline_equal_caps)"
    )
