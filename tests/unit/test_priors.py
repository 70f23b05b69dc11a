"""What a study measures first: SGLang's recommended chain always, the one-step chain as well
when the objective reads a level above one request in flight (conf/search/eagle3_five.yaml)."""

from __future__ import annotations

from omegaconf import OmegaConf

from sweep.study.search.priors import first_trials, left_out
from sweep.study.trial.objective import Objective
from tests.conftest import ROOT

SEARCH = OmegaConf.load(ROOT / "conf/search/eagle3_five.yaml")


def chains(trials: list[dict]) -> list[tuple[int, int, int]]:
    keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    return [tuple(t[k] for k in keys) for t in trials]  # type: ignore[misc]


def test_a_single_stream_objective_starts_from_sglangs_recommended_chain_only():
    assert chains(first_trials(SEARCH, Objective("tok_s", 64))) == [(3, 1, 4)]
    assert chains(first_trials(SEARCH, Objective("speedup", 64))) == [(3, 1, 4)]


def test_an_objective_under_load_also_measures_the_one_step_chain_next():
    for objective in (
        Objective("throughput", 64),
        Objective("tok_s+throughput", 64),
        Objective("weighted_throughput", 64, levels=[1, 8, 32, 64]),
    ):
        assert chains(first_trials(SEARCH, objective)) == [(3, 1, 4), (1, 1, 2)], objective.name


def test_a_space_without_the_key_enqueues_what_it_names():
    search = OmegaConf.create({"enqueue": [{"mem_fraction_static": 0.85, "hicache_size": 0}]})
    assert first_trials(search, Objective("throughput", 150)) == [
        {"mem_fraction_static": 0.85, "hicache_size": 0}
    ]


def test_a_prior_a_narrowed_categorical_does_not_list_is_left_out_and_said():
    """Optuna cannot enqueue a categorical value the choices lack; the space narrowed to other
    choices says the user does not want it launched. The banner names the value and the list."""
    search = OmegaConf.merge(
        SEARCH, {"space": {"speculative_num_steps": {"type": "categorical", "choices": [2]}}}
    )
    assert first_trials(search, Objective("tok_s", 64)) == []
    assert left_out(search, Objective("tok_s", 64)) == [
        "speculative_num_steps=3 is not among search.space's speculative_num_steps choices [2]"
    ]
    wider = OmegaConf.merge(
        SEARCH, {"space": {"speculative_num_steps": {"type": "categorical", "choices": [2, 3]}}}
    )
    assert chains(first_trials(wider, Objective("tok_s", 64))) == [(3, 1, 4)]
    assert left_out(wider, Objective("tok_s", 64)) == []
