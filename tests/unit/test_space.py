from __future__ import annotations

import re

import optuna
import pytest
from omegaconf import OmegaConf

from harness.errors import ConfigError
from sweep.study.search.space import DRAFT, STEPS, TOPK, SearchSpace

SPACE = {
    STEPS: {"type": "int", "low": 1, "high": 5},
    TOPK: {"type": "categorical", "choices": [1, 2, 4]},
    DRAFT: {"type": "int", "low": 2, "high": 16},
    "mem_fraction_static": {"type": "float", "low": 0.82, "high": 0.94, "step": 0.01},
    "hicache_size": {"type": "categorical", "choices": [0, 48]},
}


def space(overrides=None) -> SearchSpace:
    return SearchSpace.from_config(OmegaConf.create({**SPACE, **(overrides or {})}))


def sample(n: int, sampler=None) -> list[tuple[optuna.trial.FrozenTrial, dict]]:
    study = optuna.create_study(sampler=sampler or optuna.samplers.RandomSampler(seed=1))
    s, out = space(), []
    for _ in range(n):
        trial = study.ask()
        values = s.suggest(trial)
        study.tell(trial, 1.0)
        out.append((study.trials[-1], values))
    return out


def test_topk_one_derives_draft_tokens_instead_of_sampling_them():
    chains = [(t, v) for t, v in sample(200) if v[TOPK] == 1]
    assert chains
    for trial, values in chains:
        assert values[DRAFT] == values[STEPS] + 1
        assert DRAFT not in trial.params  # Optuna never sees a value SGLang would change
        assert trial.user_attrs[f"derived.{DRAFT}"] == values[STEPS] + 1


def test_trees_never_exceed_what_topk_and_steps_can_hold():
    trees = [v for _, v in sample(300) if v[TOPK] > 1]
    assert trees
    for v in trees:
        assert 2 <= v[DRAFT] <= v[TOPK] * v[STEPS] + 1


def test_values_stay_on_the_declared_grid():
    for _, v in sample(50):
        assert 0.82 <= v["mem_fraction_static"] <= 0.94
        assert round(v["mem_fraction_static"], 2) == v["mem_fraction_static"]
        assert v["hicache_size"] in (0, 48)


def test_tpe_handles_the_conditional_space():
    sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=3, multivariate=True, group=True)
    assert len(sample(12, sampler)) == 12


def test_overrides_target_server_keys_or_groups():
    s = space({"drafter": {"type": "categorical", "choices": ["a", "b"], "target": "drafter"}})
    assert s.overrides({STEPS: 3, "drafter": "a"}) == [
        "server.speculative_num_steps=3",
        "drafter=a",
    ]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({STEPS: {"type": "integer", "low": 1, "high": 2}}, "type='integer'"),
        ({STEPS: {"type": "int", "low": 5, "high": 1}}, "needs low <= high"),
        ({TOPK: {"type": "categorical", "choices": []}}, "non-empty choices"),
    ],
)
def test_bad_space_is_refused(bad, message):
    with pytest.raises(ConfigError, match=message):
        space(bad)


def test_draft_tokens_alone_are_refused():
    with pytest.raises(ConfigError, match="only together with"):
        SearchSpace.from_config(OmegaConf.create({DRAFT: SPACE[DRAFT]}))


@pytest.mark.parametrize(
    ("name", "node", "message"),
    [
        ("warp_factor", {"type": "int", "low": 1, "high": 9}, "unknown parameter"),
        (STEPS, {"type": "int", "low": 0.0, "high": 4.0}, f"{STEPS}.low=0: must be >= 1"),
        (TOPK, {"type": "categorical", "choices": [1, 32]}, f"{TOPK}.choices=32: must be <= 16"),
        ("mem_fraction_static", {"type": "float", "low": 0.8, "high": 1.2}, "high=1.2: must be <="),
    ],
)
def test_space_outside_sglangs_ranges_is_refused(name, node, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        SearchSpace.from_config(OmegaConf.create({name: node}))


def test_a_targeted_parameter_may_name_any_config_key():
    space = SearchSpace.from_config(
        OmegaConf.create(
            {"drafter": {"type": "categorical", "choices": ["a"], "target": "drafter"}}
        )
    )
    assert space.overrides({"drafter": "a"}) == ["drafter=a"]
