"""The load an export was chosen for, and how to check another.

A configuration is the answer for the load it was ranked at: the study's ranking
(sweep.readout.ranking: single-stream decode, throughput at one level, or a weighted load
profile), or the level asked with `--level`. Faster at one request in flight says nothing about
64: speculation's verify steps cost more as the batch grows, and there it can lose to no
speculation. The levels the study also measured are checked with `specsweep reproduce --level
N` (the per-level rule, sweep.study.answer.levels); a study that measured no other level is
followed by a study over the load profile (conf/experiment/load_profile.yaml) of the same setup, its
groups named by the config files the recorded names come from.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any

from omegaconf import OmegaConf

from sweep.paths import CONF
from sweep.readout.commands import rerun_command
from sweep.readout.ranking import for_objective
from sweep.study.trial.objective import Objective

PROFILE_EXPERIMENT = "load_profile"  # conf/experiment/load_profile.yaml

SETUP_GROUPS = ("engine", "model", "drafter", "hardware")  # what the profile study must keep


@dataclass(frozen=True)
class ChosenFor:
    load: str  # in words
    levels: tuple[int, ...]  # the concurrency levels it was chosen at
    measured: tuple[int, ...]  # the levels the study measured (benchmark.concurrency)
    objective: str  # search.objective
    how: str  # what chose it

    @property
    def others(self) -> list[int]:
        """Levels the study measured that it was not chosen at."""
        return [c for c in self.measured if c not in self.levels]

    def note(self) -> str:
        text = f"Chosen for {self.load}, {self.how}."
        if self.others:
            return text + (
                f" The study also measured {', '.join(map(str, self.others))} in flight, where "
                "the answer may differ: the commands below check."
            )
        return text + (
            " No other load was measured: at more requests in flight the answer may differ "
            "(speculation's verify steps cost more as the batch grows). The command below "
            "measures the load profile."
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "levels": list(self.levels), "measured": list(self.measured)}


def _level_text(level: int) -> str:
    if level == 1:
        return "single-stream decode, one request in flight (concurrency 1 only)"
    return f"{level} requests in flight (concurrency {level} only)"


def chosen_for(cfg: Any, level: int | None, run_asked: bool) -> ChosenFor:
    """`cfg`: the trial's recorded config; `level`: --level; `run_asked`: --run chose it."""
    objective = Objective.from_config(cfg.search, cfg.benchmark)
    measured = tuple(sorted({int(c) for c in cfg.benchmark.concurrency}))
    if level is not None:
        how = f"by --level {level}: the answer there by the per-level rule"
        return ChosenFor(_level_text(level), (level,), measured, objective.name, how)
    ranking = for_objective(objective)
    how = f"by the study's objective ({objective.labels[0]})"
    if run_asked:
        how = f"as the run asked for with --run (the study ranks by {objective.labels[0]})"
    if ranking.weighted is not None:
        levels = tuple(objective.levels)
        load = f"a load profile over {', '.join(map(str, levels))} requests in flight"
        return ChosenFor(load, levels, measured, objective.name, how)
    at = ranking.level or 1
    return ChosenFor(_level_text(at), (at,), measured, objective.name, how)


@functools.cache
def _options(group: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """conf/<group>/*.yaml by the `name` each gives: (the option, its values)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for file in sorted((CONF / group).glob("*.yaml")):
        values = OmegaConf.to_container(OmegaConf.load(file))
        if isinstance(values, dict) and values.get("name") is not None:
            found.setdefault(str(values["name"]), (file.stem, values))
    return found


def profile_study(cfg: Any, experiment: str, results: str) -> tuple[str, str]:
    """What it is for, and `specsweep sweep experiment=load_profile` with the study's engine,
    model, drafter and hardware (their conf/ options, found by the names the trial recorded; a
    path or SGLang surface that differs from the option's is given as a key) and the same
    results folder; the sweep names a study of its own from that setup. What it could not carry
    is said with its purpose."""
    overrides = [f"experiment={PROFILE_EXPERIMENT}"]
    gaps = []
    for group in SETUP_GROUPS:
        recorded = cfg[group]
        found = _options(group).get(str(recorded.name))
        if found is None:
            gaps.append(
                f"the study's {group} ({recorded.name}) is not a file of conf/{group}/, so the "
                f"command composes the default {group}: add {group}=<the file of yours>"
            )
            continue
        option, values = found
        overrides.append(f"{group}={option}")
        for key in ("path", "sglang_version"):
            mine = recorded.get(key)
            if key in values and mine is not None and str(mine) != str(values[key]):
                overrides.append(f"{group}.{key}={mine}")
    overrides.append(f"tracking.dir={results}")  # a study of its own: its name is derived
    profile = OmegaConf.load(CONF / "experiment" / f"{PROFILE_EXPERIMENT}.yaml")
    levels = ", ".join(str(c) for c in profile.benchmark.concurrency)
    purpose = (
        f"Measure this setup over the load profile (conf/experiment/{PROFILE_EXPERIMENT}.yaml: "
        f"every trial at {levels} in flight, and the answer at each), a study of its own"
    )
    return " ".join([purpose, *(f"Note: {gap}." for gap in gaps)]), rerun_command(overrides)
