"""The simulator's draft trees are selected per request and round as SGLang 0.5.23 selects them.

SGLang 0.5.23 (`srt/speculative/spec_utils.py` `_select_top_k_tokens_first/_later`: topk
branches per draft step, each expanded into topk tokens scored by their path's product of draft
probabilities; `srt/speculative/eagle_utils.py` `organize_draft_results`:
`torch.topk(score_list, num_draft_token - 1)`, the D - 1 best scores of all steps verified). So
2/2/3 verifies the chain a1 -> b1 in a round where p(a1) p(b1 | a1) > p(a2) and the siblings a1, a2
in another, and 2/1/3 always the chain: their per-step histograms differ (more steps that accept
one draft, fewer that accept two). 2/4/3 verifies what 2/2/3 does in every round: a candidate
outside the best two branches never wins one of two slots (the condition: no child outscores its
parent or a better-ranked sibling, which holds for any draft probabilities, and the simulator's
per-node draws do not depend on topk: harness/sim/model/draft_tree.py).
"""

from __future__ import annotations

import math
import random

from harness.measure.step_acceptance import StepShape, step_histograms
from harness.sim.model import draft_tree
from harness.sim.model.perf_model import PerfModel
from tests.sim._engine import engine
from tests.sim.test_step_acceptance_model import _run, _timeline

REQUESTS, MAX_TOKENS = 48, 1000


def _spec(steps: int, topk: int, draft: int) -> tuple[str, ...]:
    return (
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
        "--speculative-num-draft-tokens", str(draft),
    )  # fmt: skip


def _serve(steps: int, topk: int, draft: int):
    """The seeds' box serving REQUESTS greedy requests; (model, requests, chunk sizes)."""
    e = engine(*_spec(steps, topk, draft))
    prompts = [f"Prove that {n} squared is {n * n}, step by step." for n in range(REQUESTS)]
    requests = [
        e.new_request(p, MAX_TOKENS, ignore_eos=True, thinking=False, greedy=True) for p in prompts
    ]
    return e.model, requests, _run(e, requests)


def _histogram(requests, sizes):
    [hist] = step_histograms(
        [_timeline(r, s) for r, s in zip(requests, sizes, strict=True)], StepShape(depth=2)
    )
    return hist


def _at_least(model: PerfModel, rounds: int) -> list[float]:
    """P(>= 1), P(>= 2) over `rounds` sampled rounds at the start of an output."""
    rng, counts = random.Random(7), [0, 0]
    for _ in range(rounds):
        for j in range(model.sample_tokens(rng, 0, 1.0) - 1):
            counts[j] += 1
    return [c / rounds for c in counts]


def test_2_2_3_verifies_siblings_in_some_rounds_and_accepts_otherwise_than_2_1_3():
    tree_model, requests, sizes = _serve(2, 2, 3)
    chain_model = _serve(2, 1, 3)[0]

    # Per round, the kept pair is the two best scores of all candidates: a1 always, then a2 or
    # b1, whichever scores higher (organize_draft_results).
    shape = tree_model.tree
    means = draft_tree.top1_means(tree_model.spec.drafter, shape, 1.0, 0)
    misses = draft_tree.miss_table(tree_model.spec.drafter, shape)
    siblings = 0
    for seed in range(2000):
        r = draft_tree._draft(seed, shape, means, misses)
        depths = sorted(-neg_depth for _, neg_depth, _, _ in r.kept)
        assert depths in ([1, 1], [1, 2])
        siblings += depths == [1, 1]
    assert 0 < siblings < 2000  # a chain in some rounds, two siblings in others

    # Sampled rounds: more accept one draft, fewer accept two, each beyond 4 standard errors of
    # the difference of two shares
    rounds = 400_000
    tree, chain = _at_least(tree_model, rounds), _at_least(chain_model, rounds)
    for k, (t, c) in enumerate(zip(tree, chain, strict=True)):
        error = 4 * math.sqrt((t * (1 - t) + c * (1 - c)) / rounds)
        assert (t - c > error) if k == 0 else (c - t > error), (k, t, c, error)
    # ... as the model has it, and the chain's histogram is the calibrated product of its rates
    assert tree_model.accept_at_least(0) != chain_model.accept_at_least(0)
    a1, a2 = means
    assert chain_model.accept_at_least(0) == [a1, a1 * a2]

    # The harness's per-step histogram of the served tree follows the tree's model, as a chain's
    # follows the chain's (tests/sim/test_step_acceptance_model.py)
    hist = _histogram(requests, sizes)
    expected, steps = [0.0, 0.0], 0
    for request, chunk_sizes in zip(requests, sizes, strict=True):
        position = chunk_sizes[0]
        for size in chunk_sizes[1:]:
            at = tree_model.accept_at_least(position, request.prompt_factor)
            expected = [a + b for a, b in zip(expected, at, strict=True)]
            steps, position = steps + 1, position + size
    for measured, model_value in zip(hist.at_least, (v / steps for v in expected), strict=True):
        assert abs(measured - model_value) < 4 * math.sqrt(model_value * (1 - model_value) / steps)


def test_2_4_3_accepts_exactly_what_2_2_3_does_in_every_round():
    _, narrow_requests, narrow = _serve(2, 2, 3)
    _, wide_requests, wide = _serve(2, 4, 3)
    assert narrow == wide  # every request's stream chunks, run for run
    assert [r.verify_ct for r in narrow_requests] == [r.verify_ct for r in wide_requests]


def test_a_chain_through_the_tree_selection_accepts_what_the_chain_model_does():
    """topk 1 keeps the chain's own sampling (bit for bit what it was); the selection with one
    branch per step draws the same acceptance: the confidence's mean is the calibrated rate."""
    model = _serve(3, 1, 4)[0]
    shape = draft_tree.TreeShape(3, 1, 4)
    means = draft_tree.top1_means(model.spec.drafter, shape, 1.0, 0)
    misses = draft_tree.miss_table(model.spec.drafter, shape)
    rounds = 100_000
    accepted = [draft_tree.sample_accepted(seed, shape, means, misses) for seed in range(rounds)]
    expected = model.expected_accept_len(0) - 1
    mean = sum(accepted) / rounds
    sd = math.sqrt(sum((a - mean) ** 2 for a in accepted) / rounds)
    assert abs(mean - expected) < 4 * sd / math.sqrt(rounds)
