"""The no-speculation baseline: measured once per study, reused after, re-checked for drift.

The baseline depends on the setup (`SweepPlan.setup_key`: engine, model, hardware, benchmark,
the fixed server knobs), not on the searched values, so a study stores one per setup in its user
attrs and every later sweep or worker reuses it. Workers starting together claim it (`Claims`):
one measures, the others wait for its result. At the end it is measured again, so a machine that
drifted during the sweep is reported rather than folded into the speedups.

With equal caps (search.baseline_equal_caps, the default) the baseline runs speculation's 48
running requests, which no deployment without speculation does. When a level of
benchmark.concurrency is above that cap (and max_running_requests is not set), a second
baseline is measured once per setup at SGLang's own limit (`Baseline(session, uncapped=True)`,
`needs_uncapped`): the per-level answers above the cap compare against it
(sweep.study.answer.levels).
No level above the cap: nothing more is measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.record.layout import stamp
from harness.record.results import Outcome, TrialResult
from harness.record.stats import objective_runs
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS
from sweep.config.fraction import baseline_mem_fraction
from sweep.readout.console import console
from sweep.study.loop.session import CLAIM_POLL_S, StudySession
from sweep.tracking import identity

_BASELINE_KEYS = ("drafter", "server.speculative_")


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def baseline_overrides(
    arguments: Sequence[str], name: str, mem_fraction: float | None = None
) -> list[str]:
    """The user's overrides without speculation: the drafter and its knobs go, drafter=none;
    `mem_fraction` (baseline_mem_fraction) sets server.mem_fraction_static unless the user did."""
    kept = [a for a in arguments if not _override_key(a).startswith(_BASELINE_KEYS)]
    out = [*kept, "drafter=none", f"trial.name={name}", "trial.role=baseline"]
    given = any(_override_key(a) == "server.mem_fraction_static" for a in kept)
    if mem_fraction is not None and not given:
        out.append(f"server.mem_fraction_static={mem_fraction}")
    return out


def needs_uncapped(cfg) -> bool:
    """Whether the study measures the baseline at SGLang's own running-request limit as well:
    the study's baseline has the equal cap, nobody set max_running_requests, and some level is
    above the cap (below it the cap never binds: both baselines are one server)."""
    search = cfg.search
    return bool(
        search.baseline
        and search.get("baseline_equal_caps", True)
        and cfg.server.max_running_requests is None
        and max(cfg.benchmark.concurrency, default=1) > SPEC_MAX_RUNNING_REQUESTS
    )


class Baseline:
    def __init__(self, session: StudySession, *, uncapped: bool = False):
        self.session = session
        self.uncapped = uncapped  # at SGLang's own running-request limit (no equal cap)
        self.attr = identity.baseline_attr(session.plan.setup_key, uncapped)
        self.result: TrialResult | None = None
        self.recheck_result: TrialResult | None = None
        self.measured_here = False  # by this sweep (not reused): its time is this sweep's

    @property
    def tok_s(self) -> float | None:
        if self.result is None or self.result.outcome is not Outcome.OK:
            return None
        return self.result.metrics.get("tok_s")

    @property
    def runs(self) -> dict[int, float] | None:
        """tok/s per run number (harness.record.stats.objective_runs): pairs for the speedup's
        interval."""
        if self.result is None or self.tok_s is None:
            return None
        return objective_runs(self.result.runs)

    def measure_or_reuse(self) -> TrialResult | None:
        """Once per study: the worker that claims it measures, the others wait and reuse it."""
        if not self.session.cfg.search.baseline:
            return None
        claims = self.session.claims
        announced = False
        while True:
            reused = self._stored()
            if reused is not None:
                self.result = reused
                return reused
            if claims.try_claim(self.attr):
                try:
                    self.result = self._reused_or_measured()
                    return self.result
                finally:
                    claims.release(self.attr)
            if not announced:
                console.print("[bold]\\[baseline][/bold] another worker is measuring it; waiting")
                announced = True
            self.session.sleep(CLAIM_POLL_S)

    def recheck(self) -> None:
        """Measure it again at the end; the summary reports the drift."""
        session = self.session
        if not (session.cfg.search.remeasure_baseline and self.tok_s and session.results):
            return
        session.header("baseline re-check", "", "speculation off, to detect drift")
        name = f"baseline_{session.plan.setup_key}_recheck_{stamp()}"
        self.recheck_result = self._run(name)

    def _stored(self) -> TrialResult | None:
        session = self.session
        result = identity.stored_baseline(session.study, session.plan.setup_key, self.uncapped)
        if result is None:
            return None
        console.print(
            "[bold]\\[baseline][/bold] reusing the study's baseline: "
            f"{result.metrics['tok_s']:.1f} tok/s ({result.folder})",
            soft_wrap=True,
        )
        return result

    def _reused_or_measured(self) -> TrialResult:
        reused = self._stored()  # told just before its claim was released?
        if reused is not None:
            return reused
        session = self.session
        if self.uncapped:
            session.header("baseline", "", "speculation off, SGLang's own running-request limit")
        else:
            session.header("baseline", "", "speculation off")
        suffix = "_uncapped" if self.uncapped else ""
        result = self._run(f"baseline_{session.plan.setup_key}{suffix}")
        self.measured_here = True
        if result.outcome is not Outcome.OK and self.uncapped:
            console.print("[red]the uncapped baseline failed: levels compare at equal caps.[/red]")
            return result
        if result.outcome is not Outcome.OK:
            console.print("[red]the baseline failed: trials run on, without speedups.[/red]")
            if session.plan.objective.name == "speedup":
                raise SystemExit("search.objective=speedup cannot be computed without a baseline")
            return result
        session.study.set_user_attr(
            self.attr,
            {"folder": result.folder, "tok_s": result.metrics["tok_s"], "result": result.to_dict()},
        )
        return result

    def overrides(self, name: str) -> list[str]:
        """The job's overrides: the sweep's without speculation (a resolve relaunch adds its
        run numbers to them)."""
        session = self.session
        fraction = baseline_mem_fraction(session.cfg.search, session.cfg.server)
        overrides = baseline_overrides(session.plan.arguments, name, fraction)
        if self.uncapped:  # the user's own value of the key goes: one value per key for Hydra
            key = "search.baseline_equal_caps"
            overrides = [o for o in overrides if _override_key(o) != key] + [f"{key}=false"]
        return overrides

    def pooled(self, result: TrialResult) -> None:
        """Its runs pooled with a resolve relaunch's (sweep.study.answer.pooling): the study's
        record of it too, so a resume or another worker reuses the pooled baseline."""
        self.result = result
        self.session.study.set_user_attr(
            self.attr,
            {"folder": result.folder, "tok_s": result.metrics["tok_s"], "result": result.to_dict()},
        )

    def _run(self, name: str) -> TrialResult:
        session = self.session
        result = session.launch(self.overrides(name), name)
        session.log(result, baseline_tok_s=None)
        session.reporter(name).trial_done(result, None)
        return result
