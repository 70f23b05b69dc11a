"""A chain's P(>=k), measured from the simulator's stream chunks the way the harness counts them,
agrees with the simulator's own model of acceptance by depth (perf_model: the chance an
iteration yields at least k + 1 tokens, at each step's output position and prompt factor).

The engine runs on an instant clock with a fixed seed, so the draw is the same every time. The
tolerance is four standard errors of a share over the ~25,000 counted steps (0.002-0.003): a
depth read one off (P(>=k+1) for P(>=k), 35-50% lower here), a chunk read as two steps or two as
one, or a model the simulator does not sample from, fails by far. (The first and the cut last
chunk are one step in ~400 per request here: the unit tests pin those exactly.)
"""

from __future__ import annotations

import asyncio
import math

from harness.measure.step_acceptance import StepShape, step_histograms
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.sim.request import SimRequest
from tests.sim._engine import engine

CHAIN = (
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
    "--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "6",
)  # fmt: skip
REQUESTS, MAX_TOKENS = 64, 1000


async def _chunks(request: SimRequest) -> list[int]:
    """The tokens each of the request's stream chunks carried, first to last."""
    sizes = []
    while True:
        chunk = await request.queue.get()
        sizes.append(len(chunk.tokens))
        if chunk.finish_reason is not None:
            return sizes


def _run(e, requests: list[SimRequest]) -> list[list[int]]:
    async def drive() -> list[list[int]]:
        loop = asyncio.create_task(e.run())
        for r in requests:
            e.submit(r)
        out = await asyncio.gather(*(_chunks(r) for r in requests))
        loop.cancel()
        return list(out)

    return asyncio.run(drive())


def _timeline(request: SimRequest, sizes: list[int]) -> Timeline:
    record = RequestRecord(
        "measure", 1, 4, request.rid, 0.0, 0.0, 1.0,
        completion_tokens=sum(sizes), finish_reason="length", verify_ct=request.verify_ct,
    )  # fmt: skip
    counts = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    return Timeline(record, [(float(i), n) for i, n in enumerate(counts)])


def test_a_chains_measured_p_at_least_k_agrees_with_the_simulators_model():
    e = engine(*CHAIN)
    prompts = [f"Prove that {n} squared is {n * n}, step by step." for n in range(REQUESTS)]
    requests = [
        e.new_request(p, MAX_TOKENS, ignore_eos=True, thinking=False, greedy=True) for p in prompts
    ]
    sizes = _run(e, requests)
    assert all(s[0] == 1 for s in sizes)  # the first chunk is prefill's token
    assert all(len(s) - 1 == r.verify_ct for s, r in zip(sizes, requests, strict=True))

    [hist] = step_histograms(
        [_timeline(r, s) for r, s in zip(requests, sizes, strict=True)], StepShape(depth=5)
    )
    assert hist.refused is None and hist.merged_steps == 0 and hist.requests == REQUESTS

    # The model's P(>=k) at every verify step's position (tokens before it) and prompt factor.
    model, expected = e.model, [0.0] * 5
    steps = 0
    for request, chunk_sizes in zip(requests, sizes, strict=True):
        position = chunk_sizes[0]
        for size in chunk_sizes[1:]:
            at_least = model.accept_at_least(position, request.prompt_factor)
            assert math.isclose(  # the model's own identity: tau = 1 + sum of P(>=k)
                1 + sum(at_least), model.expected_accept_len(position, request.prompt_factor)
            )
            expected = [a + b for a, b in zip(expected, at_least, strict=True)]
            steps += 1
            position += size
    expected = [v / steps for v in expected]

    assert hist.steps > 0.95 * steps  # only the steps in each request's last 6 tokens left out
    for k, (measured, model_value) in enumerate(zip(hist.at_least, expected, strict=True), 1):
        error = math.sqrt(model_value * (1 - model_value) / hist.steps)
        assert abs(measured - model_value) < 4 * error, (k, measured, model_value, error)
    # Falling with depth, as a chain's must: each P(>=k) holds the next.
    assert all(a > b for a, b in zip(hist.at_least, hist.at_least[1:], strict=False))
