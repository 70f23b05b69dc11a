"""A discrete knob's values whatever its type: a categorical override merged over the default
int range (`{type: categorical, choices: [2, 3]}` over `{type: int, low: 1, high: 5}`) keeps
only its choices, and the model sampler enumerates configurations from them, so what it
proposes is a value Optuna can launch."""

from __future__ import annotations

from sweep.study.model.predict import configurations
from sweep.study.search.space import Param, SearchSpace


def test_a_categorical_merged_over_a_range_keeps_its_choices_only():
    p = Param("speculative_num_steps", "categorical", low=1, high=5, choices=(2, 3))
    assert (p.low, p.high, p.step) == (None, None, None)
    assert p.levels() == (2, 3)
    assert Param("speculative_num_steps", "int", low=1, high=5, step=2).levels() == (1, 3, 5)


def test_the_model_enumerates_categorical_steps_and_draft_tokens_from_their_choices():
    space = SearchSpace(
        {
            "speculative_num_steps": Param(
                "speculative_num_steps", "categorical", low=1, high=5, choices=(2, 3)
            ),
            "speculative_eagle_topk": Param(
                "speculative_eagle_topk", "categorical", choices=(1, 2)
            ),
            "speculative_num_draft_tokens": Param(
                "speculative_num_draft_tokens", "categorical", choices=(4, 6, 16)
            ),
        }
    )
    shapes = sorted(c.shape for c in configurations(space, ()))
    # chains run steps + 1 whatever is asked; a tree at most topk * steps + 1 draft tokens
    assert shapes == [(2, 1, 3), (2, 2, 4), (3, 1, 4), (3, 2, 4), (3, 2, 6)]
