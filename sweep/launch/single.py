"""One trial without a search (`specsweep trial`, `python sweep.py`), in its study: a folder of
its own per call (`single-<time>`), and compared with the baseline its study measured for the
same setup, where the study has one.

The trial lands in the study its command line names (sweep.config.study_name: derived from the
setup unless search.study_name is given). A study that recorded another setup is refused, as a
sweep is (sweep.tracking.identity); a knob the study holds for every server counts as set by
the trial's own value. The study is only read: a trial neither creates it nor adds to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from harness.record.layout import stamp
from harness.record.results import Outcome, TrialResult
from sweep.config.setup_key import setup, setup_key
from sweep.config.study_name import derived_name, explicit_name
from sweep.readout.verdict import against_baseline, ratio_interval
from sweep.tracking import identity

NAME = "single"  # trial.name's default (sweep.config.schema.TrialConfig)


def own_folder(overrides: Sequence[str]) -> list[str]:
    """`trial.name=single-<time>` unless the command line names the trial: each call keeps its
    folder, where one `single` was overwritten by the next."""
    if any(o.partition("=")[0].lstrip("+") == "trial.name" for o in overrides):
        return []
    return [f"trial.name={NAME}-{stamp()}"]


@dataclass(frozen=True)
class StudyBaseline:
    study: str
    refusal: str | None  # the study measured another setup: the trial does not run
    baseline: TrialResult | None  # the study's baseline for this setup, where it has one


def study_baseline(
    cfg: DictConfig, overrides: Sequence[str], software: dict[str, str | None]
) -> StudyBaseline:
    """The trial's study, checked against the trial's setup, and its baseline."""
    name = str(cfg.search.study_name)
    study = identity.existing_study(name, str(cfg.tracking.optuna_storage))
    if study is None:
        return StudyBaseline(name, None, None)
    stored = study.user_attrs.get(identity.SETUP_ATTR) or {}
    held = [key.removeprefix("pinned.") for key in stored if key.startswith("pinned.")]
    pinned = {k: OmegaConf.select(cfg, f"server.{k}") for k in held}
    now = setup(cfg, software, drafter=True, pinned=pinned)
    unnamed = [o for o in overrides if explicit_name([o]) is None]
    derived = derived_name(cfg, unnamed, software, multirun=False)
    refusal = identity.check(study, now, derived)
    if refusal is not None:
        return StudyBaseline(name, refusal, None)
    return StudyBaseline(name, None, identity.stored_baseline(study, setup_key(cfg, software)))


def comparison_line(result: TrialResult, found: StudyBaseline) -> str:
    """The trial against its study's baseline, run for run where both ran the same prompts."""
    base = found.baseline
    if base is None or base.outcome is not Outcome.OK:
        return (
            f"no baseline of this setup in study {found.study!r} yet: a sweep of it measures "
            "one, and later trials compare with it"
        )
    versus = against_baseline(result, base)
    if result.outcome not in (Outcome.OK, Outcome.PRUNED) or versus is None:
        return f"not compared with the baseline of study {found.study}: the trial measured no rate"
    interval = ""
    if versus.low is not None and versus.high is not None:
        interval = f", 95% interval {ratio_interval(versus.low, versus.high)} (run for run)"
    return (
        f"{versus.speedup:.2f}× the baseline of study {found.study}{interval}: "
        f"{base.metrics['tok_s']:.1f} ± {base.metrics.get('tok_s_ci95', float('nan')):.1f} "
        f"tok/s ({base.folder})"
    )
