"""The resolve phase: after the trials, rounds of more runs on the contenders while the study's
verdict is unresolved, until it resolves or its budget (`search.resolve`) ends.

What a round launches is sweep.study.answer.unresolved's decision; here it is launched, one server
at a time (the baseline first, then the contenders best first), each like any trial (GPU slot, port,
pid file) but numbered after the recorded runs and without the early-stop bound: pruning is the
search's, not a measurement's. Each relaunch is pooled into its configuration's record as soon as
it ends (sweep.study.answer.pooling), so Ctrl-C keeps every finished relaunch pooled and the
interrupted one's runs in its folder; MLflow follows at the end of the round
(sweep.tracking.pooled). The study keeps the account of its rounds in the user attribute
`resolve.<setup key>` (round, contenders, run numbers, each launch, status, wall time, GPU-hours): a
resume reads it, so the budget is the study's and a finished round is never run again (an
interrupted one does not count against it). One worker of several resolves: the last to finish its
trials (while another worker's trial runs, its result may change the verdict), under a claim.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from harness.measure.prompt_plan import PromptPlan
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.workload import load_prompts
from sweep.config.specs import build_benchmark_spec
from sweep.readout.console import console, fmt_duration
from sweep.readout.ranking import for_objective
from sweep.study.answer import pooling, unresolved
from sweep.study.answer.all_sweeps import study_results
from sweep.study.answer.no_speculation import deployed_baseline, levels_above
from sweep.study.loop.baseline import Baseline
from sweep.study.loop.budget import gpu_hours
from sweep.study.loop.session import StudySession
from sweep.study.trial.objective import infeasible
from sweep.tracking import pooled as tracked

CLAIM = "resolve"  # the claim one worker holds while it resolves the study's verdict
BASELINE = "baseline"


class ResolvePhase:
    def __init__(self, session: StudySession, baseline: Baseline, uncapped: Baseline | None = None):
        self.session = session
        self.baseline = baseline
        self.uncapped = uncapped  # above the request cap, what the answer compares with
        self.settings = unresolved.Settings.from_config(session.cfg.search)
        self.ranking = for_objective(session.plan.objective)
        self.attr = f"resolve.{session.plan.setup_key}"
        self.relaunches: list[TrialResult] = []  # this sweep's: its wall time counts them
        spec = build_benchmark_spec(session.cfg)
        self.level = spec.objective_concurrency
        prompt_plan = PromptPlan(load_prompts(spec.prompts, spec.seed, spec.categories), spec)
        self.segments = min(prompt_plan.segments(c) for c in spec.concurrency)

    # -- the study's account -------------------------------------------------------------------
    def rounds(self) -> list[dict[str, Any]]:
        return list(self.session.study.user_attrs.get(self.attr) or [])

    def rounds_done(self) -> int:
        return sum(r.get("status") == "done" for r in self.rounds())

    def spent(self) -> dict[str, float]:
        """What the study's resolve rounds measured and cost, every sweep of it."""
        launches = [launch for r in self.rounds() for launch in r.get("launches", [])]
        return {
            "rounds": float(self.rounds_done()),
            "server_starts": float(len(launches)),
            "extra_runs": float(sum(len(x.get("runs", [])) for x in launches if x.get("pooled"))),
            "gpu_hours": float(sum(x.get("gpu_hours") or 0.0 for x in launches)),
        }

    def _save(self, record: dict[str, Any]) -> None:
        rounds = [r for r in self.rounds() if r.get("round") != record["round"]]
        self.session.study.set_user_attr(self.attr, [*rounds, record])

    # -- the verdict now -----------------------------------------------------------------------
    def results(self) -> list[TrialResult]:
        return study_results(self.session.study, list(self.session.results)).results

    def plan(self) -> unresolved.Plan:
        results = self.results()
        return unresolved.plan(
            results,
            self._judged(),
            self.ranking,
            self.settings,
            self.rounds_done(),
            self.segments,
            set(infeasible(results, self.session.plan.objective)),
        )

    def report(self) -> dict[str, Any]:
        """The summary's `resolve`: the verdict's state, what the rounds spent, what next."""
        now = self.plan()
        return {
            "unresolved": now.state.why,
            "verdict": now.state.text,
            "stop": now.stop,
            "settings": {
                "max_rounds": self.settings.max_rounds,
                "runs": self.settings.runs,
                "max_contenders": self.settings.max_contenders,
            },
            "spent": self.spent(),
            "rounds": self.rounds(),
            "line": self._unresolved_line(now),
        }

    # -- the rounds ----------------------------------------------------------------------------
    def _unresolved_line(self, now: unresolved.Plan) -> str | None:
        free = self.uncapped.result if self.uncapped is not None else None
        if not now.resolved and (above := levels_above(self.baseline.result, free)):
            return (
                f"[bold]Unresolved:[/bold] {now.state.why}. More runs cannot settle it here: "
                f"above the request cap ({', '.join(map(str, above))} in flight) the answer "
                "compares with the uncapped baseline, which the resolve phase does not relaunch"
            )
        extra = int(self.spent()["extra_runs"])
        return unresolved.unresolved_line(now, self.settings, self.session.plan.arguments, extra)

    def _judged(self) -> TrialResult | None:
        """The baseline the Deploy line compares with (sweep.study.answer.no_speculation), so the
        phase and the answer agree on whether it is resolved."""
        free = self.uncapped.result if self.uncapped is not None else None
        return deployed_baseline(self.baseline.result, free)

    def run(self) -> None:
        now = self.plan()
        if now.round is None:
            return
        free = self.uncapped.result if self.uncapped is not None else None
        if above := levels_above(self.baseline.result, free):
            # Its runs above the cap come from the uncapped baseline, which a round does not
            # relaunch: new run numbers would have no pair there.
            console.print(
                f"resolve: the answer compares with the uncapped baseline at "
                f"{', '.join(map(str, above))} in flight, which the resolve phase does not "
                "relaunch; the verdict stays as measured",
                soft_wrap=True,
            )
            return
        running = self.session.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if running:  # another worker's trial: its result may change the verdict
            names = ", ".join(f"trial_{t.number:04d}" for t in running[:3])
            console.print(
                f"resolve: other workers are still measuring ({names}); the last one to finish "
                "resolves the study's verdict"
            )
            return
        claims = self.session.claims
        if not claims.try_claim(CLAIM):
            console.print("resolve: another worker is resolving the study's verdict; left to it")
            return
        try:
            while now.round is not None:
                self._round(now)
                now = self.plan()
                spent = self.spent()
                after = (
                    f"after {int(spent['extra_runs'])} extra runs on {int(spent['server_starts'])}"
                    f" relaunches in {int(spent['rounds'])} round(s)"
                )
                if now.resolved:
                    console.print(
                        f"[bold]resolved[/bold] {after}: {now.state.text}", soft_wrap=True
                    )
                elif now.round is None:
                    console.print(
                        f"[bold yellow]still unresolved[/] {after}: {now.state.text}",
                        soft_wrap=True,
                    )
        finally:
            claims.release(CLAIM)

    def _round(self, now: unresolved.Plan) -> None:
        chosen = now.round
        assert chosen is not None and now.state.why is not None
        number = max((r.get("round", 0) for r in self.rounds()), default=0) + 1
        shown = now.rounds_done + 1
        console.print(
            unresolved.round_line(chosen, shown, self.settings, now.state.why), soft_wrap=True
        )
        record: dict[str, Any] = {
            "round": number,
            "status": "running",
            "why": now.state.why,
            "contenders": list(chosen.contenders),
            "baseline": chosen.baseline,
            "first_run": chosen.first_run,
            "runs": chosen.runs,
            "launches": [],
        }
        self._save(record)
        started, status = time.monotonic(), "interrupted"
        pooled: list[tuple[TrialResult, list[RunSummary], Path]] = []
        try:
            for name in ([BASELINE] if chosen.baseline else []) + list(chosen.contenders):
                entry: dict[str, Any] = {"name": name, "pooled": False}
                record["launches"].append(entry)  # kept even where Ctrl-C ends the relaunch
                self._relaunch(name, chosen, (number, shown), entry, pooled)
                self._save(record)
            status = "done"
        finally:
            record["status"], record["wall_s"] = status, time.monotonic() - started
            record["gpu_hours"] = sum(x.get("gpu_hours") or 0.0 for x in record["launches"])
            self._save(record)
            self._track(pooled)
            took = fmt_duration(record["wall_s"])
            console.print(
                f"  round {shown} {status}: {len(record['launches'])} relaunch(es), "
                f"{record['gpu_hours']:.3f} GPU-h, {took}"
            )

    def _relaunch(
        self,
        name: str,
        chosen: unresolved.Round,
        numbers: tuple[int, int],  # the study's round (its folder), the budget's (shown)
        entry: dict[str, Any],
        pooled: list[tuple[TrialResult, list[RunSummary], Path]],
    ) -> None:
        """One side of the round: relaunch, record in `entry`, pool where it is the same server
        and ended ok."""
        session = self.session
        number, shown = numbers
        is_base = name == BASELINE
        record = self.baseline.result if is_base else self._by_name(name)
        assert record is not None
        folder = pooling.relaunch_folder(record, number, session.study_dir)
        runs = [f"trial.first_run={chosen.first_run}", f"trial.runs={chosen.runs}"]
        entry.update(name=record.name, folder=str(folder))
        if is_base:
            overrides, describe = self.baseline.overrides(record.name) + runs, "speculation off"
        else:
            values = self._values(record)
            if values is None:
                console.print(f"    {name}: its searched values are not in the study; skipped")
                entry["outcome"] = "skipped"
                return
            space = session.plan.space
            overrides = [
                *session.plan.arguments,
                *space.overrides(values),
                f"trial.name={record.name}",
                f"trial.number={record.number}",
                "trial.role=trial",
                *runs,
            ]
            describe = space.describe(values)
        session.header(
            f"resolve {shown}/{self.settings.max_rounds}",
            record.name,
            f"{describe}, runs {chosen.first_run}-{chosen.last_run}",
        )
        try:
            relaunch = session.launch(overrides, record.name, folder)
        except KeyboardInterrupt:
            entry["outcome"] = str(Outcome.INTERRUPTED)  # its runs are in the folder, unpooled
            raise
        self.relaunches.append(relaunch)
        session.reporter(record.name).trial_done(
            relaunch, None if is_base else self.baseline.result
        )
        entry.update(
            outcome=str(relaunch.outcome),
            runs=sorted({r.run for r in relaunch.runs if not r.incomplete}),
            wall_s=relaunch.wall_s,
            gpu_hours=gpu_hours(relaunch, int(session.cfg.model.tp)),
        )
        why_not = (
            f"the relaunch ended {relaunch.outcome}"
            if relaunch.outcome is not Outcome.OK
            else pooling.mismatch(record, relaunch)
        )
        if why_not is not None:
            console.print(f"    [yellow]not pooled:[/] {why_not}; its runs stay in {folder}")
            return
        result = pooling.pool(record, relaunch, self.level, number)
        pooling.write(result)
        if is_base:
            self.baseline.pooled(result)
        elif any(r.name == result.name for r in session.results):
            session.replace(result)  # this sweep's; an earlier sweep's is read from its folder
        pooled.append((result, relaunch.runs, folder))
        entry["pooled"] = True
        console.print(f"    pooled: {self._change(record, result)}", soft_wrap=True)

    def _change(self, before: TrialResult, after: TrialResult) -> str:
        """trial_0003 87.5 ± 2.1 tok/s over 8 runs (was 87.1 ± 4.3 over 5)"""
        ranking = self.ranking

        def text(r: TrialResult) -> str:
            value, ci = ranking.value(r), ranking.ci95(r)
            spread = f" ± {ci:.1f}" if ci is not None else ""
            return f"{value:.1f}{spread}" if value is not None else "?"

        count = len({r.run for r in after.runs if not r.incomplete and r.concurrency == self.level})
        was = len({r.run for r in before.runs if not r.incomplete and r.concurrency == self.level})
        return (
            f"{after.name} {text(after)} {ranking.unit} over {count} runs "
            f"(was {text(before)} over {was})"
        )

    def _by_name(self, name: str) -> TrialResult | None:
        return next((r for r in self.results() if r.name == name), None)

    def _values(self, record: TrialResult) -> dict[str, Any] | None:
        """The searched values the trial was launched with: its Optuna parameters, with what
        SGLang's rules derived in their place (sweep.study.search.space)."""
        frozen = next(
            (t for t in self.session.study.get_trials(deepcopy=False) if t.number == record.number),
            None,
        )
        if frozen is None:
            return None
        values = {}
        for name in self.session.plan.space.params:
            derived = frozen.user_attrs.get(f"derived.{name}")
            if derived is None and name not in frozen.params:
                return None
            values[name] = derived if derived is not None else frozen.params[name]
        return values

    def _track(self, pooled: list[tuple[TrialResult, list[RunSummary], Path]]) -> None:
        """MLflow and the trial folders' tracking records follow the pooled records."""
        tracker = self.session.tracker
        if not pooled:
            return
        base = self.baseline.result
        base = base if base is not None and base.outcome is Outcome.OK else None
        rebased = base is not None and any(r.role == BASELINE for r, _, _ in pooled)
        try:
            ids = {} if tracker.offline else tracked.run_ids(tracker)
            for result, runs, folder in pooled:
                files = [
                    Path(result.folder) / "result.json",
                    Path(result.folder) / pooling.FIRST_LAUNCH,
                ]
                if (run_id := ids.get(result.folder)) is not None:
                    tracked.log_pooled(tracker, run_id, result, runs, folder, base, files)
            if not rebased:
                return
            assert base is not None
            for r in self.results():
                if r.outcome in (Outcome.OK, Outcome.PRUNED) and r.folder:
                    tracked.note_baseline(Path(r.folder), base)
                    if (run_id := ids.get(r.folder)) is not None:
                        tracked.rebase(tracker, run_id, r, base)
        except Exception as exc:  # the store's failure must not take the pooled records with it
            tracker.went_offline(exc)
