"""The console's memory lines (harness.measure.memory): per trial at a level above 1, what the KV
pool did; in the closing summary, which configurations were KV-bound (docs/benchmark.md,
"Memory")."""

from __future__ import annotations

from harness.measure.memory import KV_BOUND_USAGE
from harness.record.results import Outcome, TrialResult


def _level(result: TrialResult) -> int | None:
    """The level the unsuffixed memory metrics are of: the highest measured."""
    levels = [r.concurrency for r in result.runs if not r.incomplete]
    return max(levels) if levels else None


def memory_line(result: TrialResult) -> str | None:
    """One line on the pool at the trial's highest level, when it is above 1 (at one request in
    flight the pool decides nothing)."""
    m, level = result.metrics, _level(result)
    if level is None or level == 1 or "kv_pool_tokens" not in m:
        return None
    parts = [f"KV pool {int(m['kv_pool_tokens']):,} tokens"]
    if "requests_fit" in m and "request_tokens_mean" in m:
        parts[0] += f" (holds {int(m['requests_fit'])} of {m['request_tokens_mean']:,.0f})"
    if m.get("host_cache_tokens"):
        parts.append(f"host cache {int(m['host_cache_tokens']):,}")
    if "token_usage_mean" in m:
        parts.append(f"token usage {m['token_usage_mean']:.2f}")
    if "running_mean" in m and "queue_mean" in m:
        parts.append(f"{m['running_mean']:.0f} running, {m['queue_mean']:.0f} queued")
    if "cache_hit_rate" in m:
        parts.append(f"cache hits {100 * m['cache_hit_rate']:.0f}%")
    if "retractions" in m:
        parts.append(f"{int(m['retractions'])} retracted")
    bound = " [bold yellow]KV-bound[/]" if m.get("kv_bound") == 1 else ""
    return f"memory @ {level}: " + ", ".join(parts) + bound


def kv_bound_lines(results: list[TrialResult]) -> list[str]:
    """The summary's verdict on capacity: which measured configurations the pool limited."""
    ok = [r for r in results if r.outcome in (Outcome.OK, Outcome.PRUNED)]
    bound = [r for r in ok if r.metrics.get("kv_bound") == 1]
    if not bound:
        return []
    names = ", ".join(r.name for r in bound[:8]) + (", ..." if len(bound) > 8 else "")
    return [
        f"KV-bound (requests queued with token usage >= {KV_BOUND_USAGE} or fewer running than "
        "max_running_requests, or a retraction) at their highest level: "
        f"{len(bound)} of {len(ok)} configurations ({names}). More KV pool "
        "(mem_fraction_static up to its OOM boundary, HiCache for shared prefixes) may raise "
        "their throughput."
    ]
