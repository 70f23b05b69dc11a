"""The study's one answer: what to deploy, said the same way on the console, in the summary
JSON, on MLflow's parent run, in the report and by `sweep.reproduce`'s default export.

The rule is the Best line's (sweep.readout.verdict.against_baseline): the best measured trial
by the study's ranking (its objective; over a latency limit never), deployed only if it beats
the baseline beyond noise: the paired 95% interval of its speedup (run r of both sent the same
prompts) above 1x, or without pairs its lower bound above the baseline's upper bound. Otherwise
the answer is the baseline: "speculation off". A study without a baseline deploys its best
trial and says it was not compared.

The runner-ups whose 95% intervals overlap the best's are tied with it: the runs cannot tell
them apart, so any of them is as good an answer by the objective, and the answer is the one
cheapest to run (`cost`: fewest draft tokens, then fewest steps, then smallest topk: less
verify work and memory a step, less to lose where the drafter guesses badly), with the others
named. Where the answer is speculation, the one deployed must itself beat the baseline beyond
its own paired interval: a cheaper tied configuration that does not is passed over for the next
one that does (the best always does), and the line says why. Where the study measured several
levels, each level's own answer (sweep.study.answer.levels) is given beside the headline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.record import labels
from harness.record.results import Outcome, TrialResult
from harness.server.logs import NO_SPECULATION
from sweep.readout.commands import specsweep
from sweep.readout.ranking import Ranking
from sweep.readout.verdict import against_baseline, best_of, ratio_interval
from sweep.study.answer import levels

BASELINE = "baseline"
CHEAPEST = "(fewest draft tokens, then steps, then topk)"  # the order of `cost`


@dataclass
class Decision:
    deploy: str  # a trial's name, or BASELINE (speculation off)
    config: str  # labels.config_text of what is deployed, or levels.OFF
    reason: str
    best: str | None = None  # the best trial by the objective, deployed or not
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    tied_with: list[str] = field(default_factory=list)  # runner-ups within the best's interval
    # The deployed one's indistinguishable alternatives: the best and its tied runner-ups but
    # the one deployed, fastest first (the Deploy line's "tied with").
    alternatives: list[str] = field(default_factory=list)
    per_level: dict[int, str] = field(default_factory=dict)  # C -> trial name or levels.OFF
    next_command: str = ""

    @property
    def speculation(self) -> bool:
        return self.deploy != BASELINE

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "line": plain(self.line())}

    def line(self) -> str:
        what = levels.OFF if not self.speculation else f"{self.deploy} ({self.config})"
        text = f"[bold]Deploy:[/bold] {what}: {self.reason}"
        if self.speedup is not None:
            interval = (
                f", 95% interval {ratio_interval(self.low, self.high)}"
                if self.low is not None and self.high is not None
                else ""
            )
            best = self.best if not self.speculation else "it"
            text += f" ({best}: {self.speedup:.2f}× the baseline{interval})"
        if self.alternatives and self.speculation:
            text += f"; {tie_text(self.alternatives)}"
        if len(self.per_level) > 1:
            each = ", ".join(f"{c}: {answer}" for c, answer in sorted(self.per_level.items()))
            text += f". Per level (table above): {each}"
        return text + f".\n  Next: {self.next_command}"


def tie_text(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (
        f"tied with {', '.join(names[:shown])}{more} (the 95% intervals overlap: these runs "
        "cannot tell them apart)"
    )


def plain(text: str) -> str:
    """The line without console markup, for files and MLflow."""
    return text.replace("[bold]", "").replace("[/bold]", "").replace("\\[", "[")


def decide(
    results: list[TrialResult],
    baseline: TrialResult | None,
    ranking: Ranking,
    rows: list[levels.LevelRow],
    exclude: set[str],
    experiment: str,
    results_dir: str,
) -> Decision:
    best = best_of(results, exclude, ranking)
    base_ok = baseline is not None and baseline.outcome is Outcome.OK
    runner_ups = tied(best, results, exclude, ranking) if best is not None else []
    named = {r.name: r for r in results}
    group = [best, *(named[n] for n in runner_ups)] if best is not None else []
    decision = _decision(group, baseline if base_ok else None, ranking)
    decision.tied_with = runner_ups
    if decision.speculation:
        decision.alternatives = [r.name for r in group if r.name != decision.deploy]
    crashed = [r for r in results if r.role != BASELINE and r.outcome is Outcome.CRASH]
    if best is None and crashed and all(r.crash_cause == NO_SPECULATION for r in crashed):
        decision.reason = (
            "this engine build cannot run speculation on this machine: every speculative trial "
            f"launched ({len(crashed)}) failed at start-up for the engine's own reason, not for "
            "memory or the drafter (each trial's error names it)"
        )
    decision.per_level = {row.concurrency: row.recommend for row in rows}
    decision.next_command = specsweep(
        "reproduce", "--experiment", experiment, "--results", results_dir
    ) + (
        "   (re-measures it and exports launch_server.sh for it)"
        if decision.speculation
        else "   (re-measures the baseline and exports its launch, without speculation)"
    )
    return decision


def cost(result: TrialResult) -> tuple[int, int, int]:
    """What a configuration costs to run, to order the indistinguishable: its draft tokens (the
    verify step's width), then its steps (draft passes a step), then its topk, as the server
    ran them (effective, else the requested values); a value it has none of counts as 0."""
    values = result.effective or result.params
    return tuple(int(values.get(k) or 0) for k in (labels.DRAFT, labels.STEPS, labels.TOPK))  # type: ignore[return-value]


def _decision(group: list[TrialResult], baseline: TrialResult | None, ranking: Ranking):
    """`group`: the best first, then its tied runner-ups ([] when nothing was measured)."""
    if not group:
        reason = "no trial was measured within the limits"
        return Decision(BASELINE, levels.OFF, reason)
    best = group[0]
    cheapest = sorted(group, key=cost)  # stable: among equal costs, the faster first
    if baseline is None:
        pick = cheapest[0]
        reason = "the fastest measured; no baseline was measured, so not a comparison"
        if pick is not best:
            reason = f"{_cheapest_text(len(group))}; no baseline was measured, so not a comparison"
        return Decision(pick.name, _config(pick), reason, best=best.name)
    versus = against_baseline(best, baseline, ranking)
    if versus is None:
        return Decision(best.name, _config(best), "no baseline value to compare", best=best.name)
    if not versus.faster:
        reason = "no configuration beats the baseline beyond the 95% interval"
        return Decision(BASELINE, levels.OFF, reason, best.name, *_numbers(versus))
    passed_over = []  # cheaper tied ones that do not beat the baseline on their own runs
    for pick in cheapest:
        own = versus if pick is best else against_baseline(pick, baseline, ranking)
        if own is not None and own.faster:
            break
        passed_over.append(pick.name)
    reason = f"faster than the baseline beyond the 95% interval ({ranking.unit})"
    if len(group) > 1 and not passed_over:
        reason += f", and {_cheapest_text(len(group))}"
    elif passed_over:  # said, so that nobody deploys the cheaper one by hand as just as good
        reason += (
            f", and of the {len(group)} configurations the 95% intervals cannot tell apart from "
            f"the fastest, the cheapest to run {CHEAPEST} that is; not the cheaper "
            f"{', '.join(passed_over)}: tied with the fastest, but not faster than the baseline "
            "beyond its own 95% interval"
        )
    return Decision(pick.name, _config(pick), reason, best.name, *_numbers(own))


def _cheapest_text(n: int) -> str:
    return (
        f"the cheapest to run {CHEAPEST} of the {n} configurations the 95% intervals cannot "
        "tell apart from the fastest"
    )


def _config(result: TrialResult) -> str:
    return labels.config_text(result.effective or result.params)


def _numbers(versus) -> tuple[float, float | None, float | None]:
    return versus.speedup, versus.low, versus.high


def tied(
    best: TrialResult, results: list[TrialResult], exclude: set[str], ranking: Ranking
) -> list[str]:
    """Measured trials whose 95% interval overlaps the best one's (neither is better beyond
    noise), fastest first; a trial without an interval is compared by its mean alone."""
    value, ci = ranking.value(best), ranking.ci95(best) or 0.0
    if value is None:
        return []
    found = []
    for r in results:
        other = ranking.value(r)
        if (
            r is best
            or r.outcome is not Outcome.OK
            or r.name in exclude
            or other is None
            or (r.effective and r.effective == best.effective)  # the same server
        ):
            continue
        if other + (ranking.ci95(r) or 0.0) >= value - ci:
            found.append((other, r.name))
    return [name for _, name in sorted(found, reverse=True)]


def tags(decision: Decision) -> dict[str, str]:
    """The parent run's tags: `specsweep.deploy` (a trial's name or baseline) is what
    sweep.reproduce exports by default."""
    return {
        "specsweep.deploy": decision.deploy,
        "specsweep.deploy_config": decision.config,
        "specsweep.deploy_line": plain(decision.line())[:5000],
    }
