"""One search's launches on a landscape (`_search_landscape`): what each costs, what it measured.

A launch costs its simulated start-up plus benchmark time on the setup's GPUs, recorded on the
TrialResult as the harness records it, so `sweep.study.loop.budget` prices it as the sweeper does.
What a launch measures is the landscape's true value with the simulator's own run-to-run noise:

- drift: the served simulator multiplies every step by 1 + d, d an Ornstein-Uhlenbeck process
  (`harness.sim.model.drift`: spread `--sim-drift`, 0.02 by default, correlation DRIFT_TIME_S);
  here the same process, stepped through each launch (warm-up, then run after run), a run
  measuring the true rate over 1 + the mean of d during it. A launch is a new server: its drift
  starts afresh.
- sampling: with drift off, the simulator's runs of 3 requests x 2048 tokens still spread by
  2.1-3.2% (acceptance sampled token by token, and each prompt's acceptance factor, 0.9-1.1 in
  `harness/sim/intake.py`): measured with `oracle.modelled_load` over 12 runs of the bundled
  prompts, 3/1/4 and 3/4/12 on the PCIe box, 3/1/4 on H200. SAMPLING_CV = 0.03.
  Most of it is the prompts, and run r sends the same prompts in every trial of a study
  (`harness.measure.prompt_plan`): 8 runs of the instant engine, the same 3 prompts under 8
  seeds, spread by 1.2% (H100 5/1/6) and 1.0% (PCIe 3/1/4) in accept length; 8 runs of other
  prompts under one seed by 6.2% and 3.3%. So a run's draw is its prompts' factor, drawn once
  per search for each level and run number and shared by every trial (PROMPT_CV), times the
  token sampling's, drawn per trial (TOKEN_CV = 0.01), the two making SAMPLING_CV.
  It is the run's acceptance: the same spread is in the run's accept length, and the step
  time (accept length / speed) hardly moves. 12 runs of the instant engine without drift
  (the bundled prompts, 3 x 2048 tokens): speed / accept length / step time spread by
  4.9% / 4.9% / 0.17% on H100 5/1/6, 3.4% / 3.4% / 0.16% on H100 5/4/16, 2.4% / 2.4% / 0.16%
  on PCIe 3/1/4, 2.2% / 2.2% / 0.04% on H200 3/4/12
  (tests/sim/test_run_spread.py holds that relation). So a run's draw scales its speed and its
  accept length together, and the launch's histogram by the runs' mean of it: the step time a
  launch measures carries the drift, not the sampling.

The old benchmark drew 1% per run and no drift. `--drift 0.10` is the sensitivity row: runs of a
minute then spread by about 6.5% (the OU mean over 68 s at 20 s correlation is 0.65 sigma), about
the +-10% the seeds saw on single runs (shared/reference/seed-figures.md).
"""

from __future__ import annotations

import random

from benchmarks._search_landscape import (
    DATAGEN_C,
    DATAGEN_TOKENS,
    MAX_TOKENS,
    MULTI_TOKENS,
    REQUESTS,
    RUNS,
    WARMUP,
    Landscape,
)
from harness.record.results import Outcome, RunSummary, StepHistogram, TrialResult
from harness.record.stats import summarize
from harness.sim.model.drift import DRIFT_SIGMA, Drift
from harness.spec import EarlyStop
from sweep.study.loop.budget import gpu_hours
from sweep.study.model.observations import SCREENED

SAMPLING_CV = 0.03
TOKEN_CV = 0.01  # the token sampling's share, drawn per trial; the rest is the prompts'
PROMPT_CV = (SAMPLING_CV**2 - TOKEN_CV**2) ** 0.5
DRIFT_STEP_S = 2.0  # the OU process is exact at any step; 2 s resolves its 20 s correlation


def launch_tokens(kind: str) -> int:
    """The output length a launch's requests ask for on a landscape of `kind`."""
    return {"single": MAX_TOKENS, "multi": MULTI_TOKENS}.get(kind, DATAGEN_TOKENS)


class Simulation:
    """One search on one landscape; tracks when a launch first came within 2% of the optimum."""

    def __init__(
        self,
        land: Landscape,
        optimum: float,
        rng: random.Random,
        drift_sigma: float = DRIFT_SIGMA,
        prompt_seed: int | None = None,
    ):
        # prompt_seed: the search's prompts (None: drawn from rng), for a search that spans
        # several Simulations
        self.land, self.optimum, self.rng = land, optimum, rng
        self.drift_sigma = drift_sigma
        self.gpus = land.oracle.setup.tp
        self.starts, self.gpu_hours = 0, 0.0
        self.reached: tuple[int, float] | None = None
        self.screened: list[dict] = []  # the values of each screening launch that measured
        # the search's prompts: run r's in every trial
        self.prompt_seed = rng.randrange(2**31) if prompt_seed is None else prompt_seed
        self._drift: Drift | None = None

    def _noisy(
        self, rate: float, seconds: float, c: int | None = None, run: int | None = None
    ) -> float:
        """What run `run` of `seconds` at level `c` measures of a true `rate` on this launch's
        server: the drift over the run, times the run's acceptance (its prompts' factor, the same
        in every trial of the search, and this trial's token sampling; kept per level in
        `_accepted`: it moves the level's accept length too; None: a warm-up, not kept)."""
        assert self._drift is not None
        steps = max(1, round(seconds / DRIFT_STEP_S))
        mean = sum(self._drift.wander(seconds / steps) for _ in range(steps)) / steps
        accepted = self.rng.gauss(1.0, TOKEN_CV)
        if c is not None and run is not None:
            accepted *= random.Random(f"{self.prompt_seed}:{c}:{run}").gauss(1.0, PROMPT_CV)
            self._accepted.setdefault(c, []).append(accepted)
        return rate / (1.0 + mean) * accepted

    def launch(
        self,
        values: dict,
        early_stop: EarlyStop | None = None,
        runs: int = RUNS,
        screen: bool = False,
        first_run: int = 1,
    ) -> TrialResult:
        """One launch of `runs` runs per level, numbered from `first_run` (a full launch after a
        screen measures the runs the screen did not, as sweep.study.loop.screens has the
        harness do); `screen`: the model's one-run screening launch, recorded as stopped early
        and marked `screened`."""
        self.runs, self.first_run = runs, first_run
        tokens = launch_tokens(self.land.kind)
        outcome, kind, tok_s, startup, pool = self.land.oracle.point(values, tokens)
        self.starts += 1
        self._drift = Drift(self.drift_sigma, self.rng.randrange(2**31))
        self._accepted: dict[int, list[float]] = {}  # per level: each run's acceptance draw
        result = TrialResult("t", "trial", Outcome.OK, "sim", True, 1.0, dict(values))
        result.startup_s = result.startup_wall_s = startup
        if outcome == "oom":
            result.outcome, result.oom_kind, result.wall_s = Outcome.OOM, kind, startup
            self.gpu_hours += gpu_hours(result, self.gpus)
            return result
        # The KV pool as the harness records what the server reports (effective.*), which the
        # memory policy reads (sweep.study.trial.capacity).
        result.effective = {"max_total_num_tokens": pool}
        if self.land.kind == "single":
            seconds = self._single(result, tok_s, early_stop)
        elif self.land.kind == "datagen":
            seconds = self._level(
                result, DATAGEN_C, self.land.oracle.datagen(values), 2 * DATAGEN_C
            )
        else:
            seconds = self._multi(result, values)
        result.wall_s = startup + seconds
        self._acceptance(result, values, tokens)
        if screen and result.outcome is Outcome.OK:
            result.outcome = Outcome.PRUNED
            result.warnings.append(SCREENED)
            self.screened.append(dict(values))
        self.gpu_hours += gpu_hours(result, self.gpus)
        true = self.land.true_value(values)
        ok = result.outcome is Outcome.OK
        if ok and self.reached is None and true is not None and true >= 0.98 * self.optimum:
            self.reached = (self.starts, self.gpu_hours)
        return result

    def _acceptance(self, result: TrialResult, values: dict, tokens: int) -> None:
        """What the server's per-step histograms report at each measured level: P(>=k) over the
        steps the level's runs decoded, each depth's share drawn binomially (the steps of one
        search's runs are thousands: the spread is small, and it is the histogram's own)."""
        if self.land.kind == "datagen":  # speculation off: no verify steps
            for key in [k for k in result.metrics if k.startswith("_tokens_c")]:
                del result.metrics[key]
            return
        true = self.land.oracle.at_least(values, tokens)
        levels = sorted(
            int(k.removeprefix("output_tok_s_c"))
            for k in result.metrics
            if k.startswith("output_tok_s_c") and not k.endswith("_ci95")
        )
        tau = 1 + sum(true)
        for c in levels:
            draws = self._accepted.get(c) or [1.0]
            # the runs' acceptance: tau times their mean draw, P(>=k) scaled alike (at most 1)
            scale = (tau * sum(draws) / len(draws) - 1) / (tau - 1) if tau > 1 else 1.0
            level = [min(1.0, p * scale) for p in true]
            for run in result.runs:
                if run.concurrency == c:
                    run.accept_len = tau * draws[(run.run - self.first_run) % len(draws)]
                    run.accept_len_source = "server"
            steps = max(1, round(result.metrics.pop(f"_tokens_c{c}") / (1 + sum(level))))
            measured, reach = [], steps
            for k, p in enumerate(level):
                cond = p / (level[k - 1] if k else 1.0) if p else 0.0
                reach = self._binomial(reach, min(1.0, cond))
                measured.append(reach / steps)
            hist = StepHistogram(c, measured, steps, source="server")
            result.step_histograms.append(hist)
            result.metrics[f"accept_len_c{c}"] = 1 + sum(measured)

    def _binomial(self, n: int, p: float) -> int:
        """A binomial draw (normal approximation past a few dozen trials)."""
        if n < 40:
            return sum(self.rng.random() < p for _ in range(n))
        x = round(self.rng.gauss(n * p, (n * p * (1 - p)) ** 0.5))
        return min(max(x, 0), n)

    def _single(self, result: TrialResult, tok_s: float, early_stop) -> float:
        request_s = MAX_TOKENS / tok_s
        seconds = WARMUP * request_s
        self._noisy(tok_s, seconds)  # the warm-up: the drift wanders on
        runs: list[RunSummary] = []
        for run in range(self.first_run, self.first_run + self.runs):
            seconds += REQUESTS * request_s
            value = self._noisy(tok_s, REQUESTS * request_s, 1, run)
            runs.append(RunSummary(run, 1, REQUESTS, 0, 0, value, value, value, 0.1, None, None))
            if early_stop and early_stop.should_stop(runs):
                result.outcome = Outcome.PRUNED
                break
        stat = summarize([r.decode_tok_s for r in runs])
        result.runs = runs
        result.metrics = {"tok_s": stat.mean, "decode_tok_s_c1": stat.mean}
        result.metrics["output_tok_s_c1"] = stat.mean
        result.metrics["_tokens_c1"] = len(runs) * REQUESTS * MAX_TOKENS
        if stat.n > 1:
            result.metrics["tok_s_ci95"] = stat.ci95
            result.metrics["decode_tok_s_c1_ci95"] = stat.ci95
        return seconds

    def _level(self, result: TrialResult, c: int, rate: float | None, requests: int) -> float:
        """RUNS runs of `requests` completions of MULTI_TOKENS (DATAGEN_TOKENS for datagen, an
        upper bound: its answers end at their natural length) at `c` in flight."""
        assert rate is not None
        tokens = DATAGEN_TOKENS if self.land.kind == "datagen" else MULTI_TOKENS
        run_s = requests * tokens / rate  # rate: all streams' tok/s
        first = self.first_run
        values = [self._noisy(rate, run_s, c, r) for r in range(first, first + self.runs)]
        stat = summarize(values)
        # each run recorded as the harness records it (the model reads how many runs a level had)
        result.runs += [
            RunSummary(r, c, requests, 0, tokens * requests, None, None, v, None, None, None)
            for r, v in enumerate(values, start=self.first_run)
        ]
        result.metrics[f"output_tok_s_c{c}"] = stat.mean
        if self.land.kind == "multi" and c > 1:  # SGLang's #running-req, as the harness records
            result.metrics[f"running_mean_c{c}"] = self.land.oracle.running(self._values, c)
        if stat.n > 1:
            result.metrics[f"output_tok_s_c{c}_ci95"] = stat.ci95
        result.metrics[f"_tokens_c{c}"] = self.runs * requests * tokens
        return self.runs * run_s

    def _multi(self, result: TrialResult, values: dict) -> float:
        """Every level on one server start: at 1 as the single-stream runs (with warm-up), above
        1 a run of C ramp-up + max(C, 16) window completions (harness.measure.steady)."""
        per = self.land.oracle.multi(values)
        assert per is not None
        self._values = values
        seconds = 0.0
        for c, rate in per.items():
            if c == 1:
                warm = WARMUP * MULTI_TOKENS / rate
                self._noisy(rate, warm)
                seconds += warm + self._level(result, 1, rate, REQUESTS)
            else:
                seconds += self._level(result, c, rate, c + max(c, 16))
        return seconds
