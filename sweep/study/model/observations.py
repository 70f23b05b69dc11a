"""What one measured trial tells the model, stored on its Optuna trial and read back from there.

The driver writes `model_obs` when it tells a trial that ran (ok or stopped early): per measured
level, the accept length (tokens per verify step, `accept_len_c<C>`), P(>=k) with its step count
(`harness.record.results.StepHistogram`), the speeds the objectives read (decode tok/s per
user, output tok/s over all streams) with their 95% half-widths and the runs behind them, and the
requests a decode step ran and waited (the decode lines' mean `#running-req` and `#queue-req`); the
decode batch sizes the server captured as CUDA graphs, its request cap (/get_server_info) and its
KV pool (`max_total_num_tokens`); and how long the launch took (start-up, then the benchmark).
Everything the model fits is read back from the study, so a resumed sweep or another worker fits
the same model.

`run_noise` reads from those intervals how far one run strays on this box: what a screened
launch's single run is worth against the model (`knowledge.anchored`, `screening.worth_screening`,
the cost fit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from harness.record.results import Outcome, TrialResult
from harness.record.stats import t975
from sweep.study.trial.screened import POOLED, SCREENED

ATTR = "model_obs"
# SCREENED: the trial attribute of a one-run screening launch; POOLED: a full launch's, naming the
# screen whose runs its record pools (the model reads that configuration from the full trial).
# A run's relative spread before the study has measured one (a launch of one run has no
# interval); on the seeds' boxes single runs strayed +-10%, about two of these.
UNKNOWN_NOISE = 0.05
UNKNOWN_DF = 4  # its weight in `run_noise`: one launch of the default benchmark.runs=5
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
    runs: int = 0  # complete runs behind the speeds and their intervals (0: not recorded)
    running: float | None = None  # mean requests in a decode step (the decode lines' #running-req)
    queue: float | None = None  # mean requests waiting (their #queue-req): the pool or cap binds

    def speed(self, field_name: str) -> tuple[float | None, float | None]:
        """(value, 95% half-width) of `decode` or `output`."""
        return getattr(self, field_name), getattr(self, f"{field_name}_ci")

    def run_spread(self, field_name: str) -> float | None:
        """One run's relative standard deviation, from the 95% half-width of the mean of `runs`
        runs (Student t), or None when no interval or run count was recorded."""
        value, ci = self.speed(field_name)
        if not value or ci is None or not math.isfinite(ci) or self.runs < 2:
            return None
        return ci / t975(self.runs - 1) * math.sqrt(self.runs) / value


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
    fraction: float | None = None  # mem_fraction_static it ran at
    pool: int | None = None  # the KV pool it reported (max_total_num_tokens)
    # what the server reported: the decode batch sizes it captured as CUDA graphs (empty: not
    # reported) and its request cap (None: not reported)
    graph_bs: tuple[int, ...] = ()
    max_running: int | None = None

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
    runs = [r for r in result.runs if not r.incomplete]  # as the means and intervals count them
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
            "runs": sum(r.concurrency == c for r in runs),
            "running": m.get(f"running_mean_c{c}"),
            "queue": m.get(f"queue_mean_c{c}"),
        }
    if not levels:
        return None
    bench = None
    if result.outcome is Outcome.OK and result.wall_s and result.startup_wall_s is not None:
        bench = max(0.0, result.wall_s - result.startup_wall_s)
    pool = result.effective.get("max_total_num_tokens") or m.get("kv_pool_tokens")
    return {
        "levels": levels,
        "startup_s": result.startup_wall_s,
        "bench_s": bench,
        "pool": int(pool) if pool else None,
        "graph_bs": list(result.effective.get("decode_cuda_graph_bs") or []),
        "max_running": result.effective.get("max_running_requests"),
    }


def read(trials: list[FrozenTrial], others: tuple[str, ...] = ()) -> list[Observation]:
    """Every trial of the study the model can learn from (duplicates count once: their source; a
    screen pooled into its full launch: the full one)."""
    out = []
    pooled = {t.user_attrs.get(POOLED) for t in trials} - {None}
    for t in trials:
        data = t.user_attrs.get(ATTR)
        cand = t.user_attrs.get("candidate")
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED) or not data or not cand:
            continue
        if t.number in pooled:  # its runs are in the full launch's record
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
                runs=int(v.get("runs") or 0),
                running=v.get("running"),
                queue=v.get("queue"),
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
                fraction=cand.get("mem_fraction_static"),
                pool=data.get("pool"),
                graph_bs=tuple(int(b) for b in data.get("graph_bs") or ()),
                max_running=data.get("max_running"),
            )
        )
    return out


def run_noise(observations: Sequence[Observation], levels: Sequence[int], speed: str) -> float:
    """One run's relative spread on this box: the runs' variances pooled over every launch
    measured with an interval at the objective's levels (each weighted by its degrees of
    freedom), with UNKNOWN_NOISE counted as one more launch of UNKNOWN_DF (a study's first
    launch alone is a rough estimate: four degrees of freedom put its spread anywhere in
    0.6-1.7x). The spread within a launch; a server that starts a few percent off from the last
    adds to it, which the measured intervals cannot see."""
    weighted, df = UNKNOWN_DF * UNKNOWN_NOISE**2, UNKNOWN_DF
    for o in observations:
        for c in levels:
            level = o.levels.get(c)
            spread = level.run_spread(speed) if level is not None else None
            if spread is not None:
                weighted += (level.runs - 1) * spread**2
                df += level.runs - 1
    return math.sqrt(weighted / df)
