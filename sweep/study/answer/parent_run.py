"""What a sweep's parent run carries besides its summary: the per-level table, Optuna's parameter
importances and the report's figures, so the answer is one click from MLflow's runs list.

- levels-<time>.json: the recommendation per level (sweep.study.answer.levels), next to the summary;
- importances.json: Optuna's parameter importances (fANOVA, optuna.importance: needs no other
  package) per objective, over the measured trials that meet every constraint only (an OOM
  told 0 tok/s would make mem_fraction_static look decisive); the report shows it;
- report/: `python -m analysis.report` run in a subprocess (the sweep does not import analysis:
  .importlinter), its index.html and PNGs. A report that fails is a warning, not a failed sweep.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from harness.record.layout import ResultsLayout
from harness.record.results import Outcome
from sweep.study.answer import levels
from sweep.study.trial.objective import Objective

log = logging.getLogger(__name__)
IMPORTANCES = "importances.json"
REPORT_TIMEOUT_S = 120.0
MIN_TRIALS = 3  # fewer feasible trials say nothing about which parameter matters


def feasible_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("outcome") == Outcome.OK
        and all(v <= 0 for v in t.constraints.values())
        and t.values is not None
    ]


def importances(study: optuna.Study, objective: Objective) -> dict[str, dict[str, float]]:
    """{objective label: {parameter: importance (sums to 1)}}; {} with too few trials."""
    trials = feasible_trials(study)
    if len(trials) < MIN_TRIALS:
        return {}
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials(trials)
    found = {}
    for i, label in enumerate(objective.labels):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = optuna.importance.get_param_importances(
                    copy,
                    evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0),
                    target=lambda t, i=i: t.values[i],
                )
        except (ValueError, RuntimeError) as exc:  # e.g. no parameter varied in every trial
            log.info("no parameter importances for %s: %s", label, exc)
            continue
        # A knob every trial ran at one value (search.memory held it) has no effect to measure:
        # left out, not listed at 0.000, which would read as "does not matter".
        held = {k for k in values if len({t.params.get(k) for t in trials}) == 1}
        found[label] = {k: round(float(v), 4) for k, v in values.items() if k not in held}
    return found


def write_levels(summary: Path, rows: list[levels.LevelRow]) -> Path:
    path = summary.with_name(summary.name.replace("summary-", "levels-", 1))
    path.write_text(json.dumps(levels.as_dict(rows), indent=2, default=str) + "\n")
    return path


def write_report(cfg: DictConfig) -> list[tuple[Path, str]]:
    """analysis.report's page and figures, as (file, artifact folder) pairs; [] if it failed."""
    argv = [sys.executable, "-m", "analysis.report", "--results", str(cfg.tracking.dir)]
    argv += ["--experiment", str(cfg.tracking.experiment)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("the report was not written: %s", exc)
        return []
    if proc.returncode != 0:
        log.warning("the report was not written: %s", (proc.stderr or proc.stdout).strip()[-400:])
        return []
    folder = ResultsLayout.at(cfg.tracking.dir).report(str(cfg.tracking.experiment))
    files = sorted(folder.glob("*.png")) + sorted(folder.glob("*.html"))
    return [(path, "report") for path in files]


def sweep_artifacts(
    cfg: DictConfig,
    study: optuna.Study,
    objective: Objective,
    study_dir: Path,
    summary: Path,
    rows: list[levels.LevelRow],
) -> list[Path | tuple[Path, str]]:
    found: list[Path | tuple[Path, str]] = [write_levels(summary, rows)]
    weights = importances(study, objective)
    if weights:
        path = study_dir / IMPORTANCES
        path.write_text(json.dumps(weights, indent=2) + "\n")
        found.append(path)
    if OmegaConf.select(cfg, "report", default=True):
        found += write_report(cfg)
    return found
