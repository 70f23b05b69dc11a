"""SGLang's speculative-decoding rules: the algorithms and what it imposes.

The same on both surfaces unless a line says otherwise; each names the SGLang file it is read from.
"""

from __future__ import annotations

# A start-up refusal, raised while SGLang resolves its arguments (a ValueError: a traceback on
# stderr, exit code 1), right after the automatic (steps, topk, draft) choice. The same text in
# 0.5.1.post3 (srt/server_args.py __post_init__), 0.5.22 and 0.5.23
# (srt/arg_groups/speculative_hook.py `_handle_eagle_family`): a deterministic crash for a region
# of the search space (every topk > 1 with this backend).
TOPK_ONE_ONLY_BACKENDS = ("trtllm_mha",)
TOPK_BACKEND_REFUSAL = "trtllm_mha backend only supports topk = 1 for speculative decoding."

# The speculative algorithms of the EAGLE family (§2a `_handle_eagle_family`); NEXTN is an alias.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
# SGLang resets an unset max_running_requests to this when speculation is on (both surfaces).
SPEC_MAX_RUNNING_REQUESTS = 48


def canonical_algorithm(name: str | None) -> str | None:
    """The algorithm SGLang runs for `name`: upper-cased, NEXTN -> EAGLE (both surfaces)."""
    if name is None:
        return None
    name = name.upper()
    return "EAGLE" if name == "NEXTN" else name


def forced_draft_tokens(steps: int | None, topk: int | None) -> int | None:
    """The draft-token count SGLang imposes: num_steps + 1 when topk == 1, whatever was asked
    (both surfaces, with a warning); None when it is free."""
    if topk == 1 and steps is not None:
        return steps + 1
    return None


def captured_graph_max_bs(max_bs: int | None, max_running: int | None) -> int | None:
    """The largest CUDA-graph batch SGLang captures: graphs are captured only up to what the
    request pool holds (`req_to_token_pool.size`, about max_running_requests). None: unknown."""
    if max_bs is None or max_running is None:
        return max_bs
    return min(max_bs, max_running)


def draft_tree_capacity(steps: int, topk: int) -> int:
    """The most draft tokens a tree of `steps` levels and `topk` branches holds (SGLang does not
    check it; its bench_speculative.py skips configurations above it)."""
    return topk * steps + 1


def max_accepted_drafts(steps: int, draft_tokens: int) -> int:
    """The most drafts one EAGLE verify step can accept: the draft tree's depth, `steps`, and no
    more than its draft nodes, `draft_tokens - 1`. 0.5.23 sizes verify's accepted path by
    `EagleVerifyInput.max_tree_depth` = spec_steps + 1, the root included
    (speculative/eagle_info.py; the `accept_index` of speculative/eagle_utils.py), for a chain and
    a tree alike. A step therefore yields at most this + 1 tokens: its accepted drafts and the
    bonus token."""
    return max(0, min(steps, draft_tokens - 1))
