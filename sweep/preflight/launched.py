"""The memory knobs as the sweep will launch them: what the memory policy holds, what it searches.

Preflight judges host RAM and GPU memory at the values the trials will run with, not at the top
of the declared space. The decision is the sweep's own (`sweep.study.search.memory`):
`search.memory` resolved against the objective (`policies`), the knobs each policy holds
(`held_by`), the HiCache size `pin` holds (`held_hicache`) and the fraction a new study starts from
(`opening_fraction`); the enqueued priors (`sweep.study.search.priors.first_trials`) launch at
their own values besides. So the default study (search.memory=auto, an objective at concurrency 1)
is judged with HiCache at 0 and the fraction at the first prior's 0.85, and search.memory=sample at
every value of the space.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from sweep.config.fraction import FRACTION
from sweep.study.search import memory
from sweep.study.search.priors import first_trials
from sweep.study.search.space import Param, SearchSpace
from sweep.study.trial import capacity
from sweep.study.trial.objective import Objective


@dataclass(frozen=True)
class Knob:
    """One memory knob: the values the sampler proposes (`sampled`, ascending; one value where it
    is held), the values enqueued priors launch at (`priors`), and why, in words."""

    name: str
    sampled: tuple[float, ...]
    priors: tuple[float, ...] = ()
    why: str = ""

    @property
    def launched(self) -> tuple[float, ...]:
        """Every value some trial of the sweep may launch at, ascending."""
        return tuple(sorted({*self.sampled, *self.priors}))


@dataclass(frozen=True)
class Launched:
    hicache: Knob
    fraction: Knob | None  # None: no launch names it (SGLang picks; preflight's mem fraction)


def distribution(param: Param) -> BaseDistribution:
    """The Optuna distribution the sweep suggests `param` from (SearchSpace's Param.suggest)."""
    if param.type == "categorical":
        return CategoricalDistribution(list(param.choices))
    assert param.low is not None and param.high is not None
    if param.type == "int":
        return IntDistribution(int(param.low), int(param.high), step=int(param.step or 1))
    return FloatDistribution(param.low, param.high, step=param.step, log=param.log)


def _values(dist: BaseDistribution) -> tuple[float, ...]:
    if isinstance(dist, CategoricalDistribution):
        return tuple(sorted(float(c) for c in dist.choices if isinstance(c, int | float)))
    return (float(dist.low), float(dist.high))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _Policy:
    """`search.memory` as written, the policies it resolves to, the objective's highest level and
    the enqueued priors' parameter sets."""

    mode: str
    policies: tuple[str, ...]
    top: int = 1
    priors: tuple[dict, ...] = ()

    def why(self, held: str, searched: str) -> str:
        if self.policies == ("pin",):
            reason = "the objective reads concurrency 1 only" if self.mode == "auto" else "as asked"
            return f"held {held}: search.memory={self.mode} pins it, {reason}"
        if self.policies == ("pin", "ceiling"):
            return (
                f"held {held} while the KV pool holds what concurrency {self.top} keeps in "
                f"flight, searched {searched} once it does not: search.memory={self.mode}"
            )
        return f"searched {searched}: search.memory={self.mode}"

    def prior_values(self, name: str) -> tuple[float, ...]:
        values = [p.get(name) for p in self.priors]
        return tuple(float(v) for v in values if isinstance(v, int | float))


def _policy(cfg: DictConfig) -> _Policy:
    """An objective or mode that does not validate is judged as searched: the sweep refuses it
    before any launch, with its reason."""
    mode = str(cfg.search.get("memory", "auto"))
    try:
        objective = Objective.from_config(cfg.search, cfg.benchmark)
        resolved = memory.resolve_mode(mode, objective)
    except ValueError:
        return _Policy(mode, ("sample",))
    demand = capacity.demand_for(cfg) if resolved == "auto" else None
    return _Policy(
        mode,
        memory.policies(mode, objective, demand),
        max(memory.objective_levels(objective)),
        tuple(first_trials(cfg.search, objective)),
    )


def _hicache(cfg: DictConfig, space: SearchSpace, policy: _Policy) -> Knob:
    param = space.params.get(memory.HICACHE)
    if param is None:
        value = float(cfg.server.hicache_size or 0)
        return Knob(memory.HICACHE, (value,), why="server.hicache_size, not searched")
    dist = distribution(param)
    held = float(memory.held_hicache(dist))
    values = _values(dist)
    sampled: set[float] = set()
    for p in policy.policies:
        sampled |= {held} if memory.HICACHE in memory.held_by(p) else set(values)
    # An enqueued prior's HiCache is a fixed parameter: it launches as written under any policy.
    priors = policy.prior_values(memory.HICACHE)
    why = policy.why(f"at {held:g} GB", f"up to {max(values):g} GB")
    return Knob(memory.HICACHE, tuple(sorted(sampled)), priors, why)


def _fraction(cfg: DictConfig, space: SearchSpace, policy: _Policy) -> Knob | None:
    param = space.params.get(FRACTION)
    if param is None:
        value = cfg.server.mem_fraction_static
        if value is None:
            return None
        return Knob(FRACTION, (float(value),), why=f"server.{FRACTION}, not searched")
    grid = memory.fraction_grid(distribution(param))
    priors = policy.prior_values(FRACTION)
    opening = memory.opening_fraction(grid, priors[0] if priors else None)
    sampled: set[float] = set()
    for p in policy.policies:
        if FRACTION in memory.held_by(p):  # at the reference, moved only down where it OOMs
            sampled.add(opening)
        elif p == "ceiling":  # bisected from the reference towards the OOM boundary
            sampled |= {v for v in grid if v >= opening}
        else:
            sampled |= set(grid)
    # Under pin a prior runs at the reference; otherwise at its own fraction (memory.fraction).
    launched_priors = () if policy.policies[0] == "pin" else priors
    why = policy.why(f"at {opening:g}", f"up to {max(grid):g}")
    return Knob(FRACTION, tuple(sorted(sampled)), launched_priors, why)


def launched(cfg: DictConfig, space: SearchSpace) -> Launched:
    """The memory knobs of the sweep `cfg` composes, as its memory policy will launch them."""
    policy = _policy(cfg)
    return Launched(_hicache(cfg, space, policy), _fraction(cfg, space, policy))
