"""A new simulated request: its prompt's token ids, its natural length and acceptance factor."""

from __future__ import annotations

import math
import random
import time
from typing import Any

from harness.sim.capacity.tokens import prompt_ids, render
from harness.sim.model.perf_model import sampled_acceptance
from harness.sim.request import SimRequest
from harness.sim.text import stable_hash

# A reasoning model thinks for one to a few thousand tokens on the bundled prompts (median ~1200,
# so 2048 tokens finish most chains and 512 cuts nearly all, as the seeds saw): the lognormal's
# median and sigma (--sim-reasoning-tokens MEDIAN[:SIGMA] for workloads that think longer).
REASONING = (1200.0, 0.5)


def build_request(
    prompt: str | list[dict[str, Any]],
    max_new_tokens: int,
    *,
    n: int,
    seed: int,
    submitted_at: float,
    ignore_eos: bool,
    thinking: bool,
    greedy: bool,
    prompt_tokens: int | None,
    temperature: float,
    reasoning: tuple[float, float] = REASONING,
) -> SimRequest:
    """The `n`-th request. `prompt`: text, or chat messages (their contents, joined, are what
    lengths and acceptance hash; the template-rendered conversation is what the radix cache
    keys, so a conversation's next turn shares its previous turns' ids)."""
    rendered = prompt
    if not isinstance(prompt, str):
        rendered = render(prompt)
        prompt = "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    prompt_tokens = prompt_tokens or max(1, len(prompt) // 4 + 12)
    h = stable_hash(prompt)
    rng = random.Random(hash((seed, h, n)))
    lengths = random.Random(hash((seed, h))) if greedy else rng
    median, sigma = reasoning
    thinking_tokens = int(lengths.lognormvariate(math.log(median), sigma)) if thinking else 0
    natural = thinking_tokens + int(lengths.uniform(150, 600))  # then answers in a few hundred
    return SimRequest(
        rid=f"{n:08x}",
        prompt=prompt,
        submitted_at=submitted_at,
        prompt_tokens=prompt_tokens,
        ids=prompt_ids(str(rendered), prompt_tokens),
        ignore_eos=ignore_eos,
        max_new_tokens=max_new_tokens,
        # ignore_eos: it would go on past max_new_tokens, so it ends by "length"
        natural_tokens=max_new_tokens + 1 if ignore_eos else natural,
        thinking_tokens=thinking_tokens,
        # Easy (formulaic) prompts accept more drafts than hard ones: +-10% around 1.
        prompt_factor=(0.9 + 0.2 * ((h >> 8) % 1000) / 999)
        * sampled_acceptance(0.0 if greedy else temperature),
        rng=rng,
        text_seed=h if greedy else n,
        received_wall=time.monotonic(),
    )
