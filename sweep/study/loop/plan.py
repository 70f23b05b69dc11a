"""What the sweeper settled before anything started: the typed settings a study runs with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sweep.study.search.space import SearchSpace
from sweep.study.trial.objective import Objective


@dataclass(frozen=True)
class SweepPlan:
    arguments: tuple[str, ...]  # the user's overrides, passed on to every job
    space: SearchSpace
    objective: Objective
    setup_key: str  # what a measurement depends on besides the searched values (config.setup_key)
    gpus: tuple[str, ...]  # this worker's GPUs
    slots: int  # trials side by side, each on model.tp of the GPUs
    # what the engine runs on (sweep.tracking.provenance.software), part of setup_key; each trial
    # records it
    software: dict[str, str | None] = field(default_factory=dict)
    # The study's setup (sweep.config.setup_key.setup, the drafter and the held knobs included):
    # what the study records and a later sweep must match (sweep.tracking.identity)
    setup: dict[str, Any] = field(default_factory=dict)
    # The searched knobs the command line holds for every server (sweep.config.study_name)
    pinned: dict[str, Any] = field(default_factory=dict)
    derived_name: str = ""  # the study this setup lands in without search.study_name

    @property
    def parallel(self) -> bool:
        return self.slots > 1
