"""What one measured trial tells the model, stored on its Optuna trial and read back from there.

The driver writes `model_obs` when it tells a trial that ran (ok or stopped early): per measured
level, the accept length (tokens per verify step, `accept_len_c<C>`), P(>=k) with its step count
(`harness.record.results.StepHistogram`), and the speeds the objectives read (decode tok/s per
user, output tok/s over all streams) with their 95% half-widths; and how long the launch took
(start-up, then the benchmark). Everything the model fits is read back from the study, so a
resumed sweep or another worker fits the same model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from harness.record.results import Outcome, TrialResult

ATTR = "model_obs"
SCREENED = "screened"  # the trial attribute (and result warning) of a one-run screening launch
_TAU = re.compile(r"^accept_len_c\d+$")
_MEASURED = (Outcome.OK, Outcome.PRUNED)


@dataclass(frozen=True)
class Level:
    """One concurrency level of one trial."""

    tau: float | None  # accept length: tokens per verify step
    decode: float | None  # decode tok/s per user
    decode_ci: float | None
    output: float | None  # output tok/s, all streams
    output_ci: float | None
    at_least: tuple[float, ...] = ()  # P(>=1), P(>=2), ... (empty: not recorded)
    steps: int = 0  # verify steps behind at_least

    def speed(self, field_name: str) -> tuple[float | None, float | None]:
        """(value, 95% half-width) of `decode` or `output`."""
        return getattr(self, field_name), getattr(self, f"{field_name}_ci")


@dataclass(frozen=True)
class Observation:
    number: int
    steps: int
    topk: int
    draft: int
    others: tuple[tuple[str, Any], ...]  # the searched values the model does not model
    drafter: str | None
    levels: dict[int, Level] = field(default_factory=dict)
    startup_s: float | None = None
    bench_s: float | None = None  # the benchmark's share of the launch (None: stopped early)
    gpu_hours: float = 0.0
    screened: bool = False  # measured with one run (the opening), never an answer

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.steps, self.topk, self.draft)


def observation_attrs(result: TrialResult) -> dict[str, Any] | None:
    """The trial attribute the model reads, or None when the trial measured nothing it can use."""
    if result.outcome not in _MEASURED:
        return None
    m = result.metrics
    hists = {h.concurrency: h for h in result.step_histograms if h.at_least}
    levels: dict[str, dict[str, Any]] = {}
    measured = sorted(int(k.removeprefix("accept_len_c")) for k in m if _TAU.match(k))
    for c in measured:
        tau = m[f"accept_len_c{c}"]
        hist = hists.get(c)
        levels[str(c)] = {
            "tau": tau,
            "decode": m.get(f"decode_tok_s_c{c}"),
            "decode_ci": m.get(f"decode_tok_s_c{c}_ci95"),
            "output": m.get(f"output_tok_s_c{c}"),
            "output_ci": m.get(f"output_tok_s_c{c}_ci95"),
            "at_least": list(hist.at_least) if hist else [],
            "steps": hist.steps if hist else 0,
        }
    if not levels:
        return None
    bench = None
    if result.outcome is Outcome.OK and result.wall_s and result.startup_wall_s is not None:
        bench = max(0.0, result.wall_s - result.startup_wall_s)
    return {"levels": levels, "startup_s": result.startup_wall_s, "bench_s": bench}


def read(trials: list[FrozenTrial], others: tuple[str, ...] = ()) -> list[Observation]:
    """Every trial of the study the model can learn from (duplicates count once: their source)."""
    out = []
    for t in trials:
        data = t.user_attrs.get(ATTR)
        cand = t.user_attrs.get("candidate")
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED) or not data or not cand:
            continue
        if cand.get("steps") is None or cand.get("topk") is None:
            continue
        levels = {
            int(c): Level(
                tau=v.get("tau"),
                decode=v.get("decode"),
                decode_ci=v.get("decode_ci"),
                output=v.get("output"),
                output_ci=v.get("output_ci"),
                at_least=tuple(v.get("at_least") or ()),
                steps=int(v.get("steps") or 0),
            )
            for c, v in data["levels"].items()
        }
        out.append(
            Observation(
                number=t.number,
                steps=int(cand["steps"]),
                topk=int(cand["topk"]),
                draft=int(cand["draft_tokens"]),
                others=tuple((k, t.params.get(k)) for k in others),
                drafter=cand.get("drafter"),
                levels=levels,
                startup_s=data.get("startup_s"),
                bench_s=data.get("bench_s"),
                gpu_hours=float(t.user_attrs.get("gpu_hours") or 0.0),
                screened=bool(t.user_attrs.get(SCREENED)),
            )
        )
    return out
