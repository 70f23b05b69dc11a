"""Trial results the study writes itself, for trials it does not launch.

A duplicate, a dominated tree, a predicted OOM and an invalid configuration are recorded like any
trial: a folder with config.yaml (where the job's config composed) and result.json, so the folder
is the record and `python -m sweep.sync` can restore what MLflow lacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from optuna.trial import FrozenTrial

from harness.record.results import Outcome, TrialResult
from sweep.tracking import provenance

# Recorded without a server start: they cost no launch and no wall time.
NOT_LAUNCHED = (
    Outcome.DUPLICATE,
    Outcome.DOMINATED,
    Outcome.PREDICTED_OOM,
    Outcome.KNOWN_CRASH,
    Outcome.INVALID,
)
# Trials whose result came from a server: a study with none of these has nothing to answer from.
MEASURED = (Outcome.OK, Outcome.OOM, Outcome.PRUNED, Outcome.CRASH, Outcome.TIMEOUT)


def _write_config(folder: Path, job_cfg: DictConfig) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    # The job's own keys only: Hydra's runtime section exists only inside a launched job.
    (folder / "config.yaml").write_text(provenance.config_yaml(job_cfg))


def known_result(
    folder: Path,
    job_cfg: DictConfig,
    params: dict[str, Any],
    action: str,
    source: FrozenTrial,
) -> TrialResult:
    """A trial the study already knows the answer to (`duplicate`, `predicted_oom`, or
    `known_crash`)."""
    _write_config(folder, job_cfg)
    source_name = f"trial_{source.number:04d}"
    earlier = None
    if (
        source.user_attrs.get("folder")
        and (Path(source.user_attrs["folder"]) / "result.json").is_file()
    ):
        earlier = TrialResult.read(Path(source.user_attrs["folder"]))
    if action == "duplicate":
        outcome = Outcome.DUPLICATE
        error = f"same effective configuration as {source_name}: its result, not relaunched"
    elif action == "known_crash":
        outcome = Outcome.KNOWN_CRASH
        error = (
            f"failed the same way twice (last: {source_name}): "
            f"{source.user_attrs.get('failure')}: not launched again"
        )
    else:
        outcome = Outcome.PREDICTED_OOM
        error = (
            f"needs at least the memory {source_name} ran out of "
            f"({source.user_attrs.get('oom_kind')} OOM): not launched"
        )
    result = TrialResult(
        name=folder.name,
        role="trial",
        outcome=outcome,
        engine=str(job_cfg.engine.name),
        simulated=job_cfg.engine.name == "sim",
        clock_scale=earlier.clock_scale if earlier else 1.0,
        params=dict(params),
        effective=dict(earlier.effective) if earlier else {},
        metrics=dict(earlier.metrics) if earlier and outcome is Outcome.DUPLICATE else {},
        folder=str(folder),
        error=error,
        related=source_name,
        oom_kind=None if outcome is Outcome.KNOWN_CRASH else source.user_attrs.get("oom_kind"),
    )
    result.write(folder)
    return result


def dominated_result(
    folder: Path, job_cfg: DictConfig, engine: str, params: dict[str, Any], reason: str
) -> TrialResult:
    """A tree SGLang verifies exactly as a smaller launch does, at more draft work
    (`sweep.study.trial.candidates.dominating`): recorded with the reason, never launched."""
    _write_config(folder, job_cfg)
    return _recorded(folder, Outcome.DOMINATED, engine, params, reason)


def invalid_result(
    folder: Path,
    job_cfg: DictConfig | None,
    engine: str,
    params: dict[str, Any],
    error: str,
) -> TrialResult:
    """A trial whose configuration does not validate: recorded, never launched."""
    if job_cfg is not None:
        _write_config(folder, job_cfg)
    folder.mkdir(parents=True, exist_ok=True)
    return _recorded(folder, Outcome.INVALID, engine, params, error)


def _recorded(
    folder: Path, outcome: Outcome, engine: str, params: dict[str, Any], error: str
) -> TrialResult:
    """A trial recorded in its folder with why it was not launched."""
    result = TrialResult(
        name=folder.name,
        role="trial",
        outcome=outcome,
        engine=engine,
        simulated=engine == "sim",
        clock_scale=1.0,
        params=dict(params),
        folder=str(folder),
        error=error,
    )
    result.write(folder)
    return result


def interrupted_result(folder: Path) -> TrialResult | None:
    """What the folder says was measured before an interruption (None: nothing was)."""
    if not (folder / "result.json").is_file():
        return None
    return TrialResult.read(folder)
