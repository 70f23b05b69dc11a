"""Whether every launch names its --mem-fraction-static, and what SGLang picks where not."""

from __future__ import annotations

from omegaconf import DictConfig

from harness.errors import SpecsweepError
from sweep.config.fraction import FRACTION
from sweep.config.specs import build_trial_spec
from sweep.launch.memory_default import left_to_sglang
from sweep.preflight.check import Check
from sweep.study.search.space import SearchSpace


def check_fraction(cfg: DictConfig, space: SearchSpace) -> Check:
    """The trials take the searched or configured fraction and the baseline one of its own
    (sweep.config.fraction); a search without one leaves the trials to SGLang's default, which
    on an MLA or multimodal model can leave no KV cache (sweep.launch.memory_default)."""
    if FRACTION in space.params:
        return Check("mem fraction", "pass", f"searched: every trial names {FRACTION}")
    try:
        spec = build_trial_spec(cfg)
    except SpecsweepError:  # the sweep's own validation names the bad key
        return Check("mem fraction", "pass", "not checked: the config does not validate")
    told = left_to_sglang(spec, cfg.hardware.get("sim_profile"), cfg.model.get("sim_profile"))
    if told is None:
        return Check("mem fraction", "pass", "every launch names it, or SGLang's default suits")
    return Check(
        "mem fraction",
        "warn",
        told.warning(),
        f"set server.{FRACTION}=0.85 (the seeds' value), search it, or pass --mem-fraction-static",
    )
