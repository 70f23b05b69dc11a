"""Which run a reproduction deploys: the run asked for (--run), the study's own answer (the
`specsweep.deploy` tag its last sweep left on its parent run: sweep.study.answer.recommendation),
or the best by the study's objective or at one level (--level: the per-level rule,
sweep.study.answer.levels), read
from MLflow; and the trial's recorded config."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness.record.results import Outcome, TrialResult
from harness.record.stats import paired_ratio
from sweep.config.schema import SpecsweepConfig
from sweep.readout.commands import specsweep
from sweep.study.answer import levels
from sweep.study.trial.objective import Objective


def trial_runs(client: MlflowClient, experiment: str, role: str = "trial") -> list[Run]:
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no MLflow experiment {experiment!r}: run {specsweep('sweep')} first")
    return client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`specsweep.role` = '{role}' and tags.`specsweep.outcome` = 'ok'",
        order_by=["attributes.start_time DESC"],
        max_results=5000,
    )


def pick_run(
    client: MlflowClient, experiment: str, run_id: str | None, level: int | None = None
) -> tuple[Run, str]:
    """The run to deploy and why: --run, else the best by the study's own objective (its load
    profile and latency limits: sweep.study.trial.objective, read from the trials' recorded config),
    or with --level the best at that concurrency (the baseline where speculation loses there)."""
    if run_id:
        return client.get_run(run_id), "the run asked for"
    runs = trial_runs(client, experiment)
    if level is None:  # the study's own answer, as its last sweep's Deploy line said it
        answer = study_answer(client, experiment, runs)
        if answer is not None:
            return answer
    if not runs:
        raise SystemExit(f"experiment {experiment!r} has no successful trial to reproduce")
    cfg = recorded_config(client, runs[0])
    objective = Objective.from_config(cfg.search, cfg.benchmark)
    named = [(r.data.tags.get("mlflow.runName", r.info.run_id), r.data.metrics) for r in runs]
    bases = trial_runs(client, experiment, role="baseline")
    base = bases[-1].data.metrics if bases else None  # the first measurement, not the re-check
    choice = best_by_objective(named, objective, level, base)
    if choice is None:
        where = f" at concurrency {level}" if level is not None else ""
        raise SystemExit(f"no trial of {experiment!r} meets the study's limits{where}")
    index, why = choice
    if level is None or not bases:
        return runs[index], why
    # At a level, the per-level table's rule (sweep.study.answer.levels): deploy speculation only
    # if it beats the baseline beyond the paired 95% interval of their runs there.
    metric = levels.level_metric(objective, level)
    pair = [per_run(client, r, f"run.{metric}_c{level}") for r in (runs[index], bases[-1])]
    stat = levels.stat(pair[0])
    pick = levels.Pick(named[index][0], "", "", {}, *stat) if stat else None
    base_stat = levels.stat(pair[1])
    if pick is not None and base_stat is not None:
        ratio = paired_ratio(pair[0], pair[1])
        pick.speedup = pick.value / base_stat[0]
        if math.isfinite(ratio.low) and math.isfinite(ratio.high):
            pick.low, pick.high = ratio.low, ratio.high
    recommend, reason = levels.verdict(pick, base_stat)
    if recommend == levels.OFF:
        return bases[-1], f"{levels.OFF} at concurrency {level}: {reason}"
    return runs[index], f"{why}; {reason}"


def study_answer(client: MlflowClient, experiment: str, runs: list[Run]) -> tuple[Run, str] | None:
    """The run the study's last sweep said to deploy (its parent run's `specsweep.deploy` tag,
    sweep.study.answer.recommendation): a trial, or the baseline for speculation off. None for a
    study recorded before the tag, or one whose named run is not here. A last sweep without an
    answer (it was interrupted, or measured nothing: an empty tag and its "No recommendation" line)
    exits with that line: its study has no answer to export until it is resumed or a run
    is named."""
    sweeps = [
        r for r in trial_runs_any(client, experiment, "sweep") if "specsweep.deploy" in r.data.tags
    ]
    if not sweeps:
        return None
    tags = sweeps[0].data.tags
    if not tags["specsweep.deploy"]:
        said = tags.get("specsweep.deploy_line", "No recommendation")
        raise SystemExit(
            f"{said} The study has no answer to export: resume its sweep (the command it "
            "printed under that line), or name a run with --run ID."
        )
    answer, line = tags["specsweep.deploy"], tags.get("specsweep.deploy_line", "")
    why = f"the study's answer ({line.splitlines()[0] if line else answer})"
    if answer == "baseline":
        bases = trial_runs(client, experiment, role="baseline")
        return (bases[-1], why) if bases else None  # the first measurement, not the re-check
    named = [r for r in runs if r.data.tags.get("mlflow.runName") == answer]
    return (named[0], why) if named else None


def trial_runs_any(client: MlflowClient, experiment: str, role: str) -> list[Run]:
    """Runs of a role whatever their outcome, newest first (a sweep's parent has none)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`specsweep.role` = '{role}'",
        order_by=["attributes.start_time DESC"],
        max_results=100,
    )


def per_run(client: MlflowClient, run: Run, key: str) -> dict[int, float]:
    """A trial's value per run number (sweep.tracking.runs logs each run as a step)."""
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}


def recorded_config(client: MlflowClient, run: Run):
    folder = Path(run.data.tags.get("specsweep.folder", ""))
    path = folder / "config.yaml"
    if not path.is_file():  # the trial folder moved: use the copy MLflow keeps
        path = Path(client.download_artifacts(run.info.run_id, "config.yaml", tempfile.mkdtemp()))
    return OmegaConf.merge(OmegaConf.structured(SpecsweepConfig), OmegaConf.load(path))


def study_config(client: MlflowClient, experiment: str, run: Run, cfg: Any) -> Any:
    """The study's setup as a trial of it recorded it: `cfg` for a trial, but for the baseline
    (drafter=none) a trial's, whose drafter the study searched with."""
    if run.data.tags.get("specsweep.role") != "baseline":
        return cfg
    trials = trial_runs(client, experiment)
    return recorded_config(client, trials[0]) if trials else cfg


def best_by_objective(
    runs: list[tuple[str, dict[str, float]]],
    objective: Objective,
    level: int | None = None,
    baseline: dict[str, float] | None = None,
) -> tuple[int, str] | None:
    """Index of the run to deploy in `runs` ((name, metrics) of measured trials) and why; None
    when none meets the limits. Without a level: the study's objective (a Pareto front's first
    objective), infeasible trials left out, as Optuna ranks. With one: the level's metric
    (sweep.study.answer.levels), limits at that level."""
    found = []
    base_tok_s = (baseline or {}).get("tok_s")
    for i, (name, metrics) in enumerate(runs):
        result = TrialResult(name, "trial", Outcome.OK, "", False, 1.0, {}, metrics=metrics)
        if level is None:
            values = objective.values(result, base_tok_s)
            if values is None or any(v > 0 for v in objective.constraints(result).values()):
                continue
            found.append((values[0], i))
        else:
            value = metrics.get(f"{levels.level_metric(objective, level)}_c{level}")
            if value is None or levels.violations_at(objective, result, level):
                continue
            found.append((value, i))
    if not found:
        return None
    value, index = max(found)
    if level is None:
        label = objective.labels[0]
        return index, f"best by the study's objective ({label} {value:.1f})"
    metric = levels.level_metric(objective, level)
    return index, f"best at concurrency {level} ({metric} {value:.1f})"
