"""When the study's verdict is unresolved, and what a round of the resolve phase launches.

The Deploy line (sweep.study.answer.recommendation) rests on the best trial's paired 95% interval
against the baseline and on the runner-ups whose 95% intervals overlap the best's. The verdict is
unresolved when
- the best's interval against the baseline includes 1x (neither faster nor slower beyond it):
  "speculation off" then says only that these runs cannot tell; or
- the Deploy line names a trial (faster beyond its interval, or no baseline) that is tied with
  runner-ups, or the best is within the baseline's noise and tied: which one is best is open.
A best slower than the baseline beyond its interval is resolved (speculation off, whichever of
the tied trials is best).

A round (sweep.study.loop.resolve_rounds runs it) relaunches the contenders: the best, its tied
runner-ups fastest first (`search.resolve.max_contenders` trials in all) and the baseline, whose
runs with the same prompts the pairing needs. Each measures `search.resolve.runs` more runs,
numbered after the highest run number any of them recorded, so run r of every side sends the same
prompts (harness.measure.prompt_plan) and pairs. Those numbers need fresh prompts: the plan's
disjoint segments at every measured level; where the workload has fewer left, the round takes
fewer runs, and none when it has none. The statistics are the verdict's own (the same paired
interval, the same 95%); only the number of pairs grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.markup import escape

from harness.record.results import Outcome, TrialResult
from sweep.readout.commands import rerun_command
from sweep.readout.ranking import Ranking
from sweep.readout.verdict import against_baseline, best_of, ratio_interval
from sweep.study.answer.recommendation import tied

SUGGESTED_ROUNDS = 2  # what the console suggests where the phase is off


@dataclass(frozen=True)
class Settings:
    """search.resolve: rounds the study may spend in all (0: off), runs per contender a round,
    and the trials a round relaunches besides the baseline."""

    max_rounds: int = 0
    runs: int = 3
    max_contenders: int = 3

    def __post_init__(self) -> None:
        if self.max_rounds < 0:
            raise ValueError(f"search.resolve.max_rounds={self.max_rounds}: >= 0 (0: off).")
        if self.runs < 1:
            raise ValueError(f"search.resolve.runs={self.runs}: >= 1 run per contender a round.")
        if self.max_contenders < 1:
            raise ValueError(
                f"search.resolve.max_contenders={self.max_contenders}: >= 1 (the best itself)."
            )

    @classmethod
    def from_config(cls, search) -> Settings:
        node = search.get("resolve") or {}
        return cls(
            max_rounds=int(node.get("max_rounds", 0)),
            runs=int(node.get("runs", 3)),
            max_contenders=int(node.get("max_contenders", 3)),
        )


@dataclass(frozen=True)
class State:
    """The verdict as the study's results give it: why it is unresolved (None: resolved), the
    best trial and its tied runner-ups, fastest first."""

    why: str | None
    best: TrialResult | None = None
    tied: tuple[str, ...] = ()
    text: str = ""  # the verdict in one phrase: "trial_0003: 0.99× the baseline, 95% ..."


@dataclass(frozen=True)
class Round:
    contenders: tuple[str, ...]  # trials to relaunch, the best first
    baseline: bool  # the baseline too (the pairs need its runs with the same prompts)
    first_run: int  # the first new run number, the same on every side
    runs: int  # new runs on each
    left_out: tuple[str, ...] = ()  # tied runner-ups past max_contenders
    short: bool = False  # fewer runs than asked: the workload's fresh prompts run out

    @property
    def last_run(self) -> int:
        return self.first_run + self.runs - 1

    def sides(self) -> str:
        """ "trial_0003 vs baseline", "trial_0003, trial_0000 vs baseline" """
        names = ", ".join(self.contenders)
        return f"{names} vs baseline" if self.baseline else names


@dataclass(frozen=True)
class Plan:
    state: State
    round: Round | None = None  # what to launch now; None: nothing
    stop: str | None = None  # why nothing is launched though unresolved: off, spent, exhausted
    rounds_done: int = 0
    contenders: tuple[str, ...] = field(default_factory=tuple)  # who a round would relaunch
    baseline: bool = False  # and the baseline with them

    @property
    def resolved(self) -> bool:
        return self.state.why is None


def state(
    results: Sequence[TrialResult],
    baseline: TrialResult | None,
    ranking: Ranking,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> State:
    """Whether the Deploy line's answer is settled by these runs (the rules above)."""
    best = best_of(list(results), set(exclude), ranking)
    if best is None:
        return State(None)
    base = baseline if baseline is not None and baseline.outcome is Outcome.OK else None
    ties = tuple(tied(best, list(results), set(exclude), ranking))
    versus = against_baseline(best, base, ranking) if base is not None else None
    text = best.name
    if versus is not None:
        text += f": {versus.speedup:.2f}× the baseline"
        if versus.low is not None and versus.high is not None:
            text += f", 95% interval {ratio_interval(versus.low, versus.high)}"
    if ties:
        text += f"; tied with {', '.join(ties[:3])}" + (
            f" and {len(ties) - 3} more" if len(ties) > 3 else ""
        )
    if versus is not None and not versus.faster and not versus.slower:
        why = f"{best.name}'s 95% interval against the baseline includes 1×"
        return State(
            why + (f" and it is tied with {_names(ties)}" if ties else ""), best, ties, text
        )
    if ties and (versus is None or versus.faster):
        return State(f"{best.name} is tied with {_names(ties)}", best, ties, text)
    return State(None, best, ties, text)


def plan(
    results: Sequence[TrialResult],
    baseline: TrialResult | None,
    ranking: Ranking,
    settings: Settings,
    rounds_done: int,
    segments: int,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> Plan:
    """The next round, or why there is none. `rounds_done`: the study's finished rounds;
    `segments`: the disjoint runs the workload holds at every measured level (the fresh
    prompts: run numbers up to it)."""
    now = state(results, baseline, ranking, exclude)
    if now.why is None or now.best is None:
        return Plan(now, rounds_done=rounds_done)
    keep = settings.max_contenders - 1
    base = baseline if baseline is not None and baseline.outcome is Outcome.OK else None
    contenders = (now.best.name, *now.tied[:keep])

    def plan_(chosen: Round | None = None, stop: str | None = None) -> Plan:
        return Plan(now, chosen, stop, rounds_done, contenders, base is not None)

    if settings.max_rounds == 0:
        return plan_(stop="off")
    if rounds_done >= settings.max_rounds:
        return plan_(stop="spent")
    by_name = {r.name: r for r in results}
    sides = [by_name[n] for n in contenders] + ([base] if base is not None else [])
    first = 1 + max((r.run for side in sides for r in side.runs), default=0)
    fresh = segments - (first - 1)
    if fresh < 1:
        return plan_(stop="exhausted")
    runs = min(settings.runs, fresh)
    left = now.tied[keep:]
    return plan_(Round(contenders, base is not None, first, runs, left, runs < settings.runs))


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def round_line(chosen: Round, number: int, settings: Settings, why: str) -> str:
    """resolving: trial_0003 vs baseline, 3 more runs each (round 1 of 2): ..."""
    each = "each" if len(chosen.contenders) + chosen.baseline > 1 else ""
    runs = f"{chosen.runs} more run{'s' if chosen.runs > 1 else ''} {each}".rstrip()
    line = (
        f"[bold]resolving:[/bold] {chosen.sides()}, {runs} (round {number} of "
        f"{settings.max_rounds}; runs {chosen.first_run}-{chosen.last_run}): {why}"
    )
    if chosen.short:
        line += f"; only {chosen.runs} fresh run(s) of prompts left in the workload"
    if chosen.left_out:
        line += (
            f"; {len(chosen.left_out)} more tied runner-up(s) not relaunched "
            f"(search.resolve.max_contenders={settings.max_contenders})"
        )
    return line


def unresolved_line(
    current: Plan, settings: Settings, arguments: Sequence[str], extra_runs: int
) -> str | None:
    """Below the Deploy line where the verdict is unresolved: why, and what settles it."""
    if current.resolved or current.stop is None:
        return None
    why = current.state.why
    names = list(current.contenders) + (["the baseline"] if current.baseline else [])
    sides = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    if current.stop == "off":
        again = escape(rerun_command(arguments, f"search.resolve.max_rounds={SUGGESTED_ROUNDS}"))
        return (
            f"[bold]Unresolved:[/bold] {why}. More runs can settle it: {again}   (the same study: "
            f"no trial runs again; up to {SUGGESTED_ROUNDS} rounds of {settings.runs} more runs "
            f'on {sides}; docs/search.md, "The resolve phase")'
        )
    spent = f"{extra_runs} extra runs" if extra_runs else "the extra runs"
    if current.stop == "spent":
        return (
            f"[bold]Unresolved:[/bold] {why}, after {spent} in {current.rounds_done} resolve "
            f"round(s), the study's budget (search.resolve.max_rounds={settings.max_rounds}; "
            "raise it to spend more). Configurations this close may not differ at all."
        )
    return (
        f"[bold]Unresolved:[/bold] {why}; the workload has no fresh prompts left for more runs "
        "(every disjoint run of its prompt plan was measured; a larger workload holds more, in a "
        "new study: the prompts are part of what a trial measures)."
    )
