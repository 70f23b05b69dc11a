"""HiCache's host tier: `--hicache-size` GB of pinned host memory per TP rank holding KV copies.

0.5.23 sources:
- size: `mem_cache/pool_host/base.py` (HostKVCache.__init__): `size = hicache_size * 1e9 //
  size_per_token` when `--hicache-size` > 0, else `device tokens * --hicache-ratio`;
  `size_per_token` is the rank's KV bytes per token (MLA: the replicated latent, all layers).
- write policy: `arg_groups/fields/memory.py` default `write_through`;
  `mem_cache/unified_radix_cache.py`: `write_through_threshold = 1` for write_through (2 for the
  selective policies), so every node is backed up as it enters the device tree, on the cache
  controller's D2H stream (`managers/cache_controller.py`), overlapping compute. A device node
  evicted before its copy finished has no host copy (`hicache_backup_dropped_tokens_total`).
- load back: `load_back_threshold = 10` tokens (shorter host hits are recomputed); the H2D copy
  runs layer by layer ahead of the prefill forward that needs it, so a prefill lasts about the
  longer of its compute and its load.
- host LRU: the host tree evicts its least recently used leaves when full.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.sim.capacity.radix import RadixTree

LOAD_BACK_THRESHOLD = 10  # 0.5.23 unified_radix_cache.py: self.load_back_threshold = 10


def host_tokens(size_gb: float, ratio: float, device_tokens: int, bytes_per_token: int) -> int:
    """HostKVCache.size: `hicache_size * 1e9 // size_per_token`, else device tokens x ratio."""
    if size_gb > 0:
        return int(size_gb * 1e9 // bytes_per_token)
    return int(device_tokens * ratio)


class HostTier:
    def __init__(self, capacity: int, bytes_per_token: int, link_gb_s: float):
        self.capacity = capacity
        self.bytes_per_token = bytes_per_token
        self.link_bytes_s = link_gb_s * 1e9
        self.tree = RadixTree()
        self._write_free_at = 0.0  # the D2H stream: backups queue behind each other
        self.backup_tokens = 0  # sglang:hicache_backup_tokens_total
        self.loaded_tokens = 0

    @property
    def used(self) -> int:
        return self.tree.total_size

    def transfer_s(self, tokens: int) -> float:
        return tokens * self.bytes_per_token / self.link_bytes_s

    def backup(self, ids: Sequence[int], now: float) -> None:
        """Write-through: copy what the device tree just gained; ready once the stream got to it."""
        matched, _ = self.tree.match(ids)
        new = len(ids) - matched
        if new <= 0:
            return
        start = max(now, self._write_free_at)
        self._write_free_at = start + self.transfer_s(new)
        self.tree.insert(ids, ready_at=self._write_free_at)
        self.backup_tokens += new
        if self.tree.total_size > self.capacity:
            self.tree.evict(self.tree.total_size - self.capacity)

    def hit(self, ids: Sequence[int], device_hit: int, now: float) -> int:
        """Tokens past the device hit that a completed host copy holds (0 under the threshold)."""
        matched, _ = self.tree.match(ids, ready_by=now)
        extra = matched - device_hit
        return extra if extra >= LOAD_BACK_THRESHOLD else 0

    def reset(self) -> None:
        self.tree.reset()
        self._write_free_at = 0.0
