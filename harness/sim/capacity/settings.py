"""What the engine's capacity model takes from SGLang's arguments: the served simulator
(`main.py`) and the oracle build it here, the same way."""

from __future__ import annotations

import argparse
from typing import Any

from harness.sim.capacity.hicache import HostTier, host_tokens
from harness.sim.model.perf_model import MemoryPlan, PerfModel

DEFAULT_MAX_PREFILL_TOKENS = 16384  # SGLang's --max-prefill-tokens default


def host_tier(args: dict[str, Any], model: PerfModel, device_tokens: int) -> HostTier | None:
    """HiCache's host tier when --enable-hierarchical-cache is on (size per TP rank)."""
    if not args.get("enable_hierarchical_cache"):
        return None
    per_token = model.target.kv_bytes_per_token
    tokens = host_tokens(
        args.get("hicache_size") or 0, args.get("hicache_ratio") or 2.0, device_tokens, per_token
    )
    return HostTier(tokens, per_token, model.hw.host_link_gb_s)


def engine_capacity(
    args: dict[str, Any], ns: argparse.Namespace, model: PerfModel, plan: MemoryPlan
) -> dict[str, Any]:
    """The Engine keyword arguments of the capacity model."""
    kv = plan.kv_tokens
    chunk = args.get("chunked_prefill_size")
    return {
        "kv_tokens": kv,
        "context_len": args.get("context_length") or model.target.context_length,
        "host": host_tier(args, model, kv),
        "stream_interval": args.get("stream_interval") or 1,
        "max_prefill_tokens": chunk if chunk and chunk > 0 else DEFAULT_MAX_PREFILL_TOKENS,
        "reasoning": ns.sim_reasoning_tokens,
    }
