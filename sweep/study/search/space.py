"""The search space declared in conf/search/, with SGLang's rules built in.

SGLang forces `draft_tokens = num_steps + 1` when `topk == 1`, and a tree cannot hold more than
`topk * num_steps + 1` tokens. So draft tokens are sampled only when topk > 1, and then held to
what the tree can hold (the effective value is recorded as `derived.<name>`); with topk == 1
they are derived, not sampled. Only valid combinations reach a server.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf

from harness.errors import ConfigError
from harness.record import labels
from harness.record.labels import DRAFT, STEPS, TOPK
from harness.sglang.speculative import draft_tree_capacity, forced_draft_tokens
from sweep.config.schema import ServerConfig

_SERVER_KEYS = set(ServerConfig.__dataclass_fields__)
ADAPTIVE = "speculative_adaptive"  # server.speculative_adaptive (docs/adaptive.md)
__all__ = ["DRAFT", "STEPS", "TOPK", "Param", "SearchSpace", "space_hash"]
TYPES = ("int", "float", "categorical")
# What SGLang (and harness.spec) accepts for each searchable server knob: a space reaching past
# these would only produce invalid trials, so it is refused before the sweep starts.
LIMITS = {
    STEPS: (1, 16),
    TOPK: (1, 16),
    DRAFT: (2, 256),
    "mem_fraction_static": (0.05, 0.99),
    "hicache_size": (0, 4096),
    "max_running_requests": (1, 1 << 20),
    "cuda_graph_max_bs": (1, 4096),
}


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    target: str | None = None

    def __post_init__(self) -> None:
        where = f"search.space.{self.name}"
        if self.type not in TYPES:
            raise ConfigError(f"{where}.type={self.type!r}: use one of {', '.join(TYPES)}.")
        if self.type == "categorical":
            if not self.choices:
                raise ConfigError(
                    f"{where}: a categorical parameter needs a non-empty choices list."
                )
            # An override {type: categorical, choices: [...]} merges over the default's range:
            # the low/high left over mean nothing for a list and must not be read as its bounds.
            for bound in ("low", "high", "step"):
                object.__setattr__(self, bound, None)
        elif self.low is None or self.high is None or self.low > self.high:
            raise ConfigError(f"{where}: needs low <= high (got low={self.low}, high={self.high}).")
        if self.target is None and self.name not in _SERVER_KEYS:
            raise ConfigError(
                f"{where}: unknown parameter: server has no {self.name!r}. Search one of "
                f"{', '.join(sorted(LIMITS))}, or give target=<config key> (e.g. target=drafter)."
            )
        self._check_limits(where)

    def _check_limits(self, where: str) -> None:
        if self.target is not None or self.name not in LIMITS:
            return
        lo, hi = LIMITS[self.name]
        if self.type == "categorical":
            values = [("choices", c) for c in self.choices if c is not None]
        else:
            values = [("low", self.low), ("high", self.high)]
        for label, value in values:
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ConfigError(f"{where}.{label}={value!r}: must be a number in {lo}..{hi}.")
            if isinstance(value, float) and value.is_integer() and self.type == "int":
                value = int(value)  # the schema stores bounds as floats; say it as written
            if value < lo:
                raise ConfigError(f"{where}.{label}={value}: must be >= {lo} (SGLang: {lo}..{hi}).")
            if value > hi:
                raise ConfigError(f"{where}.{label}={value}: must be <= {hi} (SGLang: {lo}..{hi}).")

    def levels(self) -> tuple[Any, ...]:
        """Every value a discrete parameter takes: its choices, or its int range on its step."""
        if self.type == "categorical":
            return self.choices
        if self.type != "int":
            raise ValueError(f"search.space.{self.name} is a float range: it has no levels")
        assert self.low is not None and self.high is not None
        return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))

    @property
    def key(self) -> str:
        """The config key this parameter overrides."""
        return self.target or f"server.{self.name}"

    def suggest(self, trial: optuna.Trial, low: float | None = None, high: float | None = None):
        low = self.low if low is None else low
        high = self.high if high is None else high
        if self.type == "categorical":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.type == "int":
            step = int(self.step or 1)
            return trial.suggest_int(self.name, int(low), int(high), step=step, log=self.log)
        value = trial.suggest_float(self.name, low, high, step=self.step, log=self.log)
        # Floats on a step grid come back as 0.8700000000000001; keep the grid value.
        return round(value, 6)


class SearchSpace:
    def __init__(self, params: dict[str, Param]):
        self.params = params
        if DRAFT in params and not (STEPS in params and TOPK in params):
            raise ConfigError(
                "search.space: speculative_num_draft_tokens is searched only together with "
                "speculative_num_steps and speculative_eagle_topk (SGLang ties the three)."
            )

    @classmethod
    def from_config(cls, space: DictConfig) -> SearchSpace:
        params = {}
        for name, node in space.items():
            data = OmegaConf.to_container(node, resolve=True)
            assert isinstance(data, dict)
            choices = tuple(data.pop("choices", None) or ())
            params[str(name)] = Param(name=str(name), choices=choices, **data)
        return cls(params)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Values for one trial, keyed by parameter name; draft tokens follow SGLang's rules."""
        values: dict[str, Any] = {}
        if ADAPTIVE in self.params:  # SGLang adapts chains only: adaptive holds topk at 1
            values[ADAPTIVE] = self.params[ADAPTIVE].suggest(trial)
        for name in (STEPS, TOPK):
            if name in self.params:
                values[name] = self.params[name].suggest(trial)
        if values.get(ADAPTIVE) and values.get(TOPK, 1) != 1:
            values[TOPK] = 1
            trial.set_user_attr(f"derived.{TOPK}", 1)
        if DRAFT in self.params:
            steps, topk = values[STEPS], values[TOPK]
            forced = forced_draft_tokens(steps, topk)
            if forced is not None:
                values[DRAFT] = forced  # SGLang would force this anyway
                trial.set_user_attr(f"derived.{DRAFT}", forced)
            else:
                # Sampled over the declared range (a fixed distribution, so the sampler can model
                # it jointly with steps and topk), then held to what the tree can hold.
                capacity = draft_tree_capacity(steps, topk)
                sampled = self.params[DRAFT].suggest(trial)
                values[DRAFT] = max(2, min(sampled, capacity))
                if values[DRAFT] != sampled:
                    trial.set_user_attr(f"derived.{DRAFT}", values[DRAFT])
        # The memory fraction last: which fraction fits depends on everything else
        # (sweep.study.search.memory proposes it from the draft tokens and HiCache size chosen).
        for name in sorted(self.params, key=lambda n: n == "mem_fraction_static"):
            if name not in values:
                values[name] = self.params[name].suggest(trial)
        return {name: values[name] for name in self.params}

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """Hydra override strings for `values` (a group target like `drafter` selects a file)."""
        out = []
        for name, value in values.items():
            key = self.params[name].key
            out.append(f"{key}={'null' if value is None else value}")
        return out

    def describe(self, values: dict[str, Any]) -> str:
        return labels.describe(values)


def space_hash(space: DictConfig) -> str:
    """The declared space as a short hash: a study records it, preflight warns when it changes."""
    blob = json.dumps(OmegaConf.to_container(space, resolve=True), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
