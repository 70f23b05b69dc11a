"""The drafter gate as the config sets it (drafter.check): where drafter verdicts are kept, and the
check itself before a sweep or a trial launches anything (harness.drafter_gate does the checks).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.record.layout import ResultsLayout
from harness.spec import TrialSpec


def drafter_cache(cfg: DictConfig) -> Path:
    """Where drafter verdicts are kept between trials and sweeps."""
    return ResultsLayout.at(cfg.tracking.dir).drafter_checks


def check_drafter(cfg: DictConfig, spec: TrialSpec) -> None:
    """Raise ConfigError when the trial's drafter would fail (see harness.drafter_gate)."""
    from harness.drafter_gate import drafter_problems

    problems = drafter_problems(
        spec.server.speculative_draft_model_path,
        spec.server.model_path,
        spec.server.speculative_algorithm or "EAGLE3",
        cfg.drafter.check,
        drafter_cache(cfg),
    )
    if problems:
        raise ConfigError(problems)
