"""The KV pool in tokens: `max_total_num_tokens` slots, shared by the radix tree and requests.

What SGLang's allocator and tree cache report (0.5.23): `available_size()` (free slots),
`tree_cache.evictable_size()` (cached tokens no running request holds), and
`num_used = max_total_num_tokens - (available + evictable)` with `token usage = num_used /
max_total_num_tokens` (`managers/scheduler_components/pool_stats_observer.py::_get_token_info`).
A running request holds its prompt as locked tree nodes (inserted after its prefill,
`cache_unfinished_req`) and its decoded tokens privately; a finished one gives its whole sequence
to the tree (`cache_finished_req`), where it stays until evicted; a retracted one frees its
private tokens and unlocks its nodes (`schedule_batch.py::release_req`, `checkpoint=False`).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.sim.capacity.hicache import HostTier
from harness.sim.capacity.radix import Node, RadixTree
from harness.sim.request import SimRequest


class KVPool:
    def __init__(self, capacity: int, host: HostTier | None = None):
        self.capacity = capacity
        self.tree = RadixTree()
        self.host = host
        self.private = 0  # decoded tokens of running requests, not in the tree yet
        self.evicted_tokens = 0

    @property
    def available(self) -> int:
        return self.capacity - self.tree.total_size - self.private

    @property
    def evictable(self) -> int:
        return self.tree.evictable_size

    @property
    def used(self) -> int:
        """`num_used`: what running requests hold (the decode line's `#token`)."""
        return self.capacity - self.available - self.evictable

    @property
    def usage(self) -> float:
        return self.used / max(self.capacity, 1)

    def ensure(self, tokens: int) -> bool:
        """Evict unlocked cache until `tokens` slots are free (`evict_to_free_tokens`)."""
        short = tokens - self.available
        if short > 0:
            self.evicted_tokens += self.tree.evict(short)
        return self.available >= tokens

    def match(self, ids: Sequence[int], now: float) -> tuple[int, int, Node]:
        """(device hit, host hit beyond it, deepest device node) for a prefill of `ids`."""
        device, node = self.tree.match(ids)
        host = self.host.hit(ids, device, now) if self.host is not None else 0
        return device, host, node

    def allocate(self, request: SimRequest, ids: Sequence[int], node: Node) -> None:
        """Admit `ids` (prompt, plus what a retracted request had decoded): the matched prefix is
        locked and the rest allocated (evicting if needed); it enters the tree after the forward
        (`commit`), so requests of one batch do not hit each other's tokens, as in SGLang, where
        the batch's prefixes were matched before any of it was computed."""
        self.tree.lock(node)
        self.ensure(len(ids) - _depth(node))
        request.node, request.in_tree = node, _depth(node)
        request.kv_private += len(ids) - request.in_tree
        self.private += len(ids) - request.in_tree

    def commit(self, request: SimRequest, ids: Sequence[int], now: float) -> None:
        """After its prefill: `cache_unfinished_req` inserts the computed input (a duplicate of
        what a batch-mate inserted first is freed) and the request locks its new last node."""
        if request.node is None:
            return  # aborted while its prefill ran: released already
        self.private -= request.kv_private
        request.kv_private = 0
        leaf, _ = self.tree.insert(ids)
        self.tree.lock(leaf)
        self.tree.unlock(request.node)
        request.node, request.in_tree = leaf, len(ids)
        if self.host is not None:
            self.host.backup(ids, now)

    def grow(self, request: SimRequest, tokens: int) -> None:
        request.kv_private += tokens
        self.private += tokens

    def finish(self, request: SimRequest, ids: Sequence[int], now: float) -> None:
        """The finished sequence joins the tree (its decoded tokens become cached tokens)."""
        if request.node is None:
            return
        self.private -= request.kv_private
        request.kv_private = 0
        self.tree.insert(ids)
        self.tree.unlock(request.node)
        self.ensure(0)  # its prefill token's slot, allocated by the step after it
        request.node = None
        if self.host is not None:
            self.host.backup(ids, now)

    def release(self, request: SimRequest) -> None:
        """Retraction: decoded tokens freed, prompt nodes unlocked (left in the tree)."""
        if request.node is None:
            return
        self.private -= request.kv_private
        request.kv_private = 0
        self.tree.unlock(request.node)
        request.node = None

    def reset(self) -> None:
        self.tree.reset()
        if self.host is not None:
            self.host.reset()


def _depth(node: Node) -> int:
    depth = 0
    while node.parent is not None:
        depth += len(node.key)
        node = node.parent
    return depth
