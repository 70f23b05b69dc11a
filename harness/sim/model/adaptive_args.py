"""The adaptive flags at start-up, as SGLang 0.5.23 resolves them (arg_groups/speculative_hook.py
`_maybe_disable_adaptive`, `_init_adaptive_speculative_params`) and its config file as its loader
reads it (speculative/adaptive_spec_params.py `_load_adaptive_config`). The policy itself is
`harness.sim.model.adaptive`."""

from __future__ import annotations

import json
from typing import Any

from harness.sglang.adaptive import (
    ADAPTIVE_DEFAULT_CONFIG,
    ADAPTIVE_DISABLED,
    adaptive_initial_steps,
    adaptive_slots,
    adaptive_unsupported_reason,
)


def resolve_adaptive(args: dict[str, Any], warn) -> None:
    """speculative_hook.py:261-264 (before the EAGLE handler): `_maybe_disable_adaptive`, then
    `_init_adaptive_speculative_params` (topk 1, steps = the middle candidate when unset, or a
    ValueError when not a candidate; draft tokens = steps + 1). A malformed file raises as
    SGLang's loader does."""
    if not args.get("speculative_adaptive"):
        return
    reason = adaptive_unsupported_reason(
        args["speculative_algorithm"], args["speculative_eagle_topk"]
    )
    if reason is not None:
        warn(ADAPTIVE_DISABLED.format(reason=reason))
        args["speculative_adaptive"] = False
        return
    config = adaptive_config(args.get("speculative_adaptive_config"))
    if args["speculative_eagle_topk"] is None:
        args["speculative_eagle_topk"] = 1
    steps = adaptive_initial_steps(config, args["speculative_num_steps"])
    args["speculative_num_steps"] = steps
    args["speculative_num_draft_tokens"] = steps + 1


def adaptive_config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {k: dict(v) for k, v in ADAPTIVE_DEFAULT_CONFIG.items()}
    with open(path) as f:
        config = json.load(f)
    adaptive_slots(config)
    return config
