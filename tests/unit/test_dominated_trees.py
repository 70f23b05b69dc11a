"""A tree whose topk or steps exceed what its draft_tokens - 1 verify slots can use is dominated:
SGLang 0.5.23 verifies a smaller launch's tree in every round, at more draft work.

SGLang 0.5.23 keeps the `num_draft_tokens - 1` best-scored candidates per request and round
(`srt/speculative/eagle_utils.py` `organize_draft_results`: `torch.topk(score_list,
num_draft_token - 1, dim=-1)`), a candidate's score being its path's product of draft
probabilities (`srt/speculative/spec_utils.py` `_select_top_k_tokens_later`). A kept node at depth
d of sibling rank m comes with its d - 1 ancestors and m - 1 better siblings, so neither a rank nor
a depth above D - 1 is ever verified (harness.sglang.speculative.dominated_by). What is the same
effective configuration stays what SGLang runs identically: a tree and a chain with as many draft
tokens are two candidates.
"""

from __future__ import annotations

import optuna
import pytest

from harness.record.results import Outcome
from harness.sglang.speculative import dominated_by
from harness.sim.model import draft_tree, profiles
from sweep.study.trial.candidates import dominating
from tests.unit.test_search import cand, result, study


@pytest.mark.parametrize(
    ("shape", "smaller"),
    [
        ((2, 4, 3), (2, 2, 3)),  # two slots: the two best branches of step one at most
        ((2, 2, 3), None),
        ((2, 4, 4), (2, 3, 4)),  # three slots: topk 3, not 2 (a third sibling can win one)
        ((2, 2, 4), None),
        ((3, 2, 3), (2, 2, 3)),  # a third draft step's tokens never win one of two slots
        ((2, 2, 2), (1, 2, 2)),  # one slot: the first draft alone, one step
        ((1, 4, 2), (1, 2, 2)),
        ((1, 2, 2), None),  # not 1/1/2: topk 1 takes other attention code (docs/search.md)
        ((5, 8, 32), None),
        ((3, 1, 4), None),  # a chain
    ],
)
def test_the_dominated_rule(shape, smaller):
    assert dominated_by(*shape) == smaller


@pytest.mark.parametrize(
    "shape", [(2, 4, 3), (2, 4, 4), (3, 2, 3), (4, 4, 4), (3, 8, 5), (2, 2, 2)]
)
def test_the_simulator_keeps_the_same_tree_as_the_launch_that_dominates_it(shape):
    """Not a restatement of the rule: the simulator drafts both launches as SGLang does and
    keeps the D - 1 best scores; the kept nodes (their scores and depths) are equal every round."""
    d = profiles.EAGLE3_37K_TTT5
    wide = draft_tree.TreeShape(*shape)
    narrow = draft_tree.TreeShape(*dominated_by(*shape))
    for seed in range(500):
        kept = []
        for s in (wide, narrow):
            means = draft_tree.top1_means(d, s, 0.8, 0)
            r = draft_tree._draft(seed, s, means, draft_tree.miss_table(d, s))
            kept.append(sorted((score, depth) for score, depth, _, _ in r.kept))
        assert kept[0] == kept[1], seed


def test_a_tree_and_the_chain_with_its_draft_tokens_are_different_candidates():
    assert cand(steps=2, topk=2, draft=3).key != cand(steps=2, topk=1, draft=3).key
    assert dominating(cand(steps=2, topk=2, draft=3)) is None


def test_a_dominated_candidate_is_not_launched_and_says_why():
    s, driver = study()
    verdict = driver.verdict(cand(steps=2, topk=4, draft=3))
    assert verdict.action == "dominated" and not verdict.launch
    assert "dominated by 2/2/3" in verdict.reason
    assert "organize_draft_results" in verdict.reason
    smaller, _ = dominating(cand(steps=2, topk=4, draft=3))
    assert smaller == cand(steps=2, topk=2, draft=3)
    # told to Optuna as infeasible, so the sampler moves away; never ranked
    t = s.ask()
    dominated = result(Outcome.DOMINATED)
    assert driver.tell(t, cand(steps=2, topk=4, draft=3), dominated, None) is (
        optuna.trial.TrialState.COMPLETE
    )
    assert s.trials[0].constraints == {"dominated": 1.0}
