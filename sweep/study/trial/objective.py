"""What a study optimises, the values a trial's result gives it, and its latency limits.

Single-level objectives read one metric (`tok_s`, `output_tok_s_c{C}`). The load-profile ones
read every level a deployment serves (`search.load_profile`; each trial measures them all on one
server start, benchmark.concurrency):
- `weighted_throughput`: sum over levels of weight x output tok/s at that level (the weights are
  the share of time the server spends at each level, normalised to 1: the tokens a second it
  serves over the day), with the 95% half-width sqrt(sum (w_i ci_i)^2) (levels independent);
- `weighted_speed`: the same over per-user decode tok/s (what a user sees, averaged over load);
- `per_level_speed`: per-user decode tok/s at each level, one Optuna objective each (a Pareto
  front: no trial on it is slower at every level than another).
Latency limits (`search.slo.<metric>=<ms>`, at `search.slo.level` or every measured level) are
constraints, not penalties: `constraints(result)` gives slo_<metric>_c<level> = value / limit - 1
(> 0 violated), which the driver sets on the trial, so Optuna's samplers treat it as infeasible
and `best_trial(s)` leave it out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from omegaconf import OmegaConf

from harness.record.results import Outcome, TrialResult

PROFILE = ("weighted_throughput", "weighted_speed", "per_level_speed")
SLO_METRICS = tuple(f"{k}_ms_p{p}" for k in ("ttft", "itl", "tpot") for p in (50, 90, 99))
_LEVEL = re.compile(r"^output_tok_s_c\d+$")
UNMEASURED = 1.0  # a limited metric missing at a level: not shown to meet it, so infeasible


class Objective:
    """`tok_s`, `speedup`, `throughput`, `tok_s+throughput` (a Pareto front), or one over the
    load profile: `weighted_throughput`, `weighted_speed`, `per_level_speed` (a Pareto front)."""

    CHOICES = ("tok_s", "speedup", "throughput", "tok_s+throughput", *PROFILE)
    # What a weighted objective sums at each level: the RunSummary field (`<field>_c<C>` metrics).
    PER_LEVEL: ClassVar[dict[str, str]] = {
        "weighted_throughput": "output_tok_s",
        "weighted_speed": "decode_tok_s",
    }

    def __init__(
        self,
        name: str,
        throughput_concurrency: int,
        levels: Sequence[int] = (),
        weights: Sequence[float] = (),
        slo: Mapping[str, float] | None = None,
        slo_level: int | None = None,
    ):
        if name not in self.CHOICES:
            raise ValueError(f"search.objective={name!r}: use one of {', '.join(self.CHOICES)}")
        self.name = name
        self.concurrency = throughput_concurrency
        self.levels = [int(c) for c in levels]  # the served levels ([]: whatever was measured)
        if name in PROFILE and not self.levels:
            raise ValueError(f"search.objective={name} needs the levels it is measured at")
        w = [float(x) for x in weights] or [1.0] * len(self.levels)
        bad = any(not (math.isfinite(x) and x >= 0) for x in w)
        if len(w) != len(self.levels) or bad or (self.levels and not sum(w) > 0):
            raise ValueError(
                f"search.load_profile.weights={w}: give one weight >= 0 per level "
                f"{self.levels} (not all 0), or none for equal weights"
            )
        self.weights = [x / sum(w) for x in w] if self.levels else []
        self.slo = {k: float(v) for k, v in (slo or {}).items()}
        self.slo_level = slo_level
        throughput = f"output_tok_s_c{throughput_concurrency}"
        profile = self._profile_text()
        self.metrics = {
            "tok_s": ["tok_s"],
            "speedup": ["tok_s"],
            "throughput": [throughput],
            "tok_s+throughput": ["tok_s", throughput],
            "weighted_throughput": ["weighted_throughput"],
            "weighted_speed": ["weighted_speed"],
            "per_level_speed": [f"decode_tok_s_c{c}" for c in self.levels],
        }[name]
        self.labels = {
            "tok_s": ["single-stream tok/s"],
            "speedup": ["speedup vs baseline"],
            "throughput": [f"throughput tok/s @ {throughput_concurrency}"],
            "tok_s+throughput": [
                "single-stream tok/s",
                f"throughput tok/s @ {throughput_concurrency}",
            ],
            "weighted_throughput": [f"weighted throughput tok/s ({profile})"],
            "weighted_speed": [f"weighted per-user tok/s ({profile})"],
            "per_level_speed": [f"per-user tok/s @ {c}" for c in self.levels],
        }[name]

    @classmethod
    def from_config(cls, search: Any, benchmark: Any) -> Objective:
        """The objective a composed config asks for; ValueError naming the key and the fix."""
        try:  # the spec's own check says more, but it runs later than this
            measured = [int(c) for c in benchmark.concurrency]
        except (TypeError, ValueError):
            raise ValueError(
                f"benchmark.concurrency={list(benchmark.concurrency)}: each level an integer "
                "1..4096, e.g. benchmark.concurrency=[1,8,64]"
            ) from None
        name = str(search.objective)
        levels = [int(c) for c in _numbers(search, "levels", int)]
        weights = _numbers(search, "weights", float)
        missing = [c for c in levels if c not in measured]
        if missing:
            raise ValueError(
                f"search.load_profile.levels={levels} lists {missing}, which benchmark."
                f"concurrency={measured} does not measure. Add them, e.g. benchmark.concurrency="
                f"[{','.join(str(c) for c in sorted({*measured, *levels}))}]."
            )
        for key, given in (("levels", levels), ("weights", weights)):
            if given and name not in PROFILE:
                raise ValueError(
                    f"search.load_profile.{key}={list(given)} is set but search.objective={name} "
                    f"does not read it: use search.objective={' or '.join(PROFILE)}, or drop it."
                )
        if len(set(levels)) != len(levels):
            raise ValueError(f"search.load_profile.levels={levels}: each level once.")
        if weights and len(weights) != len(levels or measured):
            raise ValueError(
                f"search.load_profile.weights={list(weights)}: one weight per level of "
                f"{levels or measured} (search.load_profile.levels, else benchmark.concurrency)."
            )
        if (
            "throughput" in name
            and name not in PROFILE
            and search.throughput_concurrency not in (measured)
        ):
            raise ValueError(
                f"search.objective={name} reads throughput at concurrency "
                f"{search.throughput_concurrency}, which benchmark.concurrency={measured} does "
                f"not measure. Add it, e.g. benchmark.concurrency="
                f"[1,{search.throughput_concurrency}]."
            )
        slo_cfg = OmegaConf.select(search, "slo", default=None) or {}
        slo = {k: float(v) for k, v in dict(slo_cfg).items() if k != "level" and v is not None}
        for key, limit in slo.items():
            if key not in SLO_METRICS:
                raise ValueError(f"search.slo.{key}: use one of {', '.join(SLO_METRICS)}.")
            if not limit > 0:
                raise ValueError(f"search.slo.{key}={limit}: a limit in ms must be > 0.")
        slo_level = dict(slo_cfg).get("level")
        if slo_level is not None and int(slo_level) not in measured:
            raise ValueError(
                f"search.slo.level={slo_level} is not measured (benchmark.concurrency="
                f"{measured}): add it there, or leave search.slo.level unset for every level."
            )
        return cls(
            name,
            int(search.throughput_concurrency),
            levels=(levels or measured) if name in PROFILE else (),
            weights=weights,
            slo=slo,
            slo_level=None if slo_level is None else int(slo_level),
        )

    def _profile_text(self) -> str:
        return ", ".join(f"{c}: {w:.0%}" for c, w in zip(self.levels, self.weights, strict=True))

    @property
    def multi(self) -> bool:
        return len(self.metrics) > 1

    @property
    def profile(self) -> bool:
        """Over the load profile: every level counts, so no single level's run can prune."""
        return self.name in PROFILE

    @property
    def prunable(self) -> bool:
        return not self.multi and not self.profile

    @property
    def directions(self) -> list[str]:
        return ["maximize"] * len(self.metrics)

    def derived(self, result: TrialResult) -> dict[str, float]:
        """The aggregate (and `_ci95`) a weighted objective reads; {} when a level is missing."""
        if self.name not in self.PER_LEVEL:
            return {}
        base = self.PER_LEVEL[self.name]
        values = [result.metrics.get(f"{base}_c{c}") for c in self.levels]
        if any(v is None for v in values):
            return {}
        out = {self.name: sum(w * v for w, v in zip(self.weights, values, strict=True))}  # type: ignore[misc]
        cis = [result.metrics.get(f"{base}_c{c}_ci95") for c in self.levels]
        if all(ci is not None and math.isfinite(ci) for ci in cis):
            out[f"{self.name}_ci95"] = math.sqrt(
                sum((w * ci) ** 2 for w, ci in zip(self.weights, cis, strict=True))  # type: ignore[operator]
            )
        return out

    def values(self, result: TrialResult, baseline_tok_s: float | None) -> list[float] | None:
        metrics = {**result.metrics, **self.derived(result)}
        values = [metrics.get(m) for m in self.metrics]
        if any(v is None for v in values):
            return None
        if self.name == "speedup":
            if not baseline_tok_s:
                return None
            values = [values[0] / baseline_tok_s]
        return [float(v) for v in values]  # type: ignore[arg-type]

    def run_metric(self) -> tuple[str, int | None]:
        """The per-run value early stopping watches (RunSummary field, concurrency level)."""
        if self.name in ("weighted_speed", "per_level_speed"):
            return "decode_tok_s", self.levels[0]
        if self.name == "weighted_throughput":
            return "output_tok_s", self.levels[-1]
        if self.metrics[0] == "tok_s":
            return "decode_tok_s", None
        return "output_tok_s", self.concurrency

    # -- latency limits ------------------------------------------------------------------------
    def slo_levels(self, result: TrialResult) -> list[int]:
        if self.slo_level is not None:
            return [self.slo_level]
        if self.levels:
            return self.levels
        found = {r.concurrency for r in result.runs if not r.incomplete}
        if not found:  # a result read back from MLflow: its per-level metrics name the levels
            found = {int(k.rsplit("_c", 1)[1]) for k in result.metrics if _LEVEL.match(k)}
        return sorted(found)

    def constraints(self, result: TrialResult) -> dict[str, float]:
        """slo_<metric>_c<level>: value / limit - 1 (> 0 violated; a limited metric that was not
        measured at a level counts as violated, UNMEASURED). {} without limits."""
        found: dict[str, float] = {}
        for metric, limit in sorted(self.slo.items()):
            for level in self.slo_levels(result):
                value = result.metrics.get(f"{metric}_c{level}")
                ok = value is not None and math.isfinite(value)
                found[f"slo_{metric}_c{level}"] = value / limit - 1.0 if ok else UNMEASURED
        return found

    def violations(self, result: TrialResult) -> list[str]:
        """The limits a result breaks, for people: 'itl_ms_p99 52.1 > 40 @ 64'."""
        out = []
        for key, excess in self.constraints(result).items():
            if excess <= 0:
                continue
            metric, level = key[len("slo_") :].rsplit("_c", 1)
            value = result.metrics.get(f"{metric}_c{level}")
            shown = "unmeasured" if value is None else f"{value:.1f}"
            out.append(f"{metric} {shown} > {self.slo[metric]:g} @ {level}")
        return out

    def slo_text(self) -> str:
        if not self.slo:
            return ""
        where = f"at {self.slo_level}" if self.slo_level is not None else "at every level"
        return ", ".join(f"{k} <= {v:g}" for k, v in sorted(self.slo.items())) + f" ({where})"

    def describe(self) -> str:
        """What the study records: values of studies that differ here cannot be compared."""
        if not self.profile:
            return self.name
        return f"{self.name}[{self._profile_text()}]"


def _numbers(search: Any, key: str, kind: type) -> list:
    """search.load_profile.<key> as a flat list of numbers; ValueError naming the key otherwise."""
    given = OmegaConf.select(search, f"load_profile.{key}", default=[]) or []
    example = "[1,8,32,64]" if kind is int else "[4,3,2,1]"
    try:
        values = [kind(v) for v in given]
        if any(isinstance(g, bool) for g in given) or not all(math.isfinite(v) for v in values):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(
            f"search.load_profile.{key}={given}: give a list of numbers, e.g. "
            f"search.load_profile.{key}={example}"
        ) from None
    return values


def infeasible(results: list[TrialResult], objective: Objective) -> dict[str, str]:
    """Measured trials over a latency limit -> what they broke (Optuna: constraint > 0)."""
    found = {}
    for r in results:
        if r.outcome is Outcome.OK and (broken := objective.violations(r)):
            found[r.name] = "over SLO: " + "; ".join(broken)
    return found
