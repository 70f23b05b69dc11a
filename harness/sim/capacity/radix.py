"""A radix tree over token ids: SGLang's prefix cache, in tokens (no KV indices).

0.5.23 `mem_cache/radix_cache.py`: `match_prefix` walks the tree and splits a node where a key
diverges inside it (`_split_node`); `insert` adds the unmatched tail as a new leaf; a request locks
its last node (`inc_lock_ref`: every node up to the root leaves the evictable set) and unlocks it
when it finishes or is retracted (`dec_lock_ref`); `evict` frees unlocked leaves in the eviction
strategy's order (LRU by `last_access_time`, the default `--radix-eviction-policy lru`), a parent
becoming a leaf joining the heap. `evictable_size` / `protected_size` are what the scheduler's
budget and `token usage` read (`PrefillBudget._available_and_evictable`,
`pool_stats_observer.py::_get_token_info`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_tick = itertools.count()


@dataclass(eq=False)
class Node:
    key: tuple[int, ...]
    parent: Node | None
    children: dict[int, Node] = field(default_factory=dict)
    lock_ref: int = 0
    last_access: int = 0
    ready_at: float = 0.0  # host tier: when its write-back copy is complete

    def touch(self) -> None:
        self.last_access = next(_tick)


class RadixTree:
    def __init__(self) -> None:
        self.root = Node((), None, lock_ref=1)
        self.total_size = 0
        self.evictable_size = 0
        self.protected_size = 0

    def match(self, ids: Sequence[int], *, ready_by: float | None = None) -> tuple[int, Node]:
        """(tokens matched, deepest node matched), splitting a node the match ends inside.
        `ready_by`: only nodes whose copy is complete by then (the host tier's backups)."""
        node, i, n = self.root, 0, len(ids)
        while i < n:
            child = node.children.get(ids[i])
            if child is None or (ready_by is not None and child.ready_at > ready_by):
                break
            key = child.key
            k = _common(key, ids, i)
            child.touch()
            if k < len(key):
                if k:
                    node = self._split(child, k)
                    i += k
                break
            node, i = child, i + k
        return i, node

    def insert(self, ids: Sequence[int], *, ready_at: float = 0.0) -> tuple[Node, int]:
        """Insert `ids`; (their last node, tokens newly added to the tree)."""
        matched, node = self.match(ids)
        if matched == len(ids):
            return node, 0
        leaf = Node(tuple(ids[matched:]), node, ready_at=ready_at)
        leaf.touch()
        node.children[leaf.key[0]] = leaf
        added = len(leaf.key)
        self.total_size += added
        self.evictable_size += added
        return leaf, added

    def lock(self, node: Node) -> None:
        while node is not self.root and node is not None:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]

    def unlock(self, node: Node) -> None:
        while node is not self.root and node is not None:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
            node = node.parent  # type: ignore[assignment]

    def evict(self, tokens: int, on_evict: Callable[[Node], None] | None = None) -> int:
        """Free at least `tokens` from unlocked leaves, least recently used first (or all there
        are); the tokens freed."""
        if tokens <= 0:
            return 0
        heap = [(n.last_access, id(n), n) for n in self._leaves() if n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[0]]
            freed += len(leaf.key)
            self.total_size -= len(leaf.key)
            self.evictable_size -= len(leaf.key)
            if on_evict is not None:
                on_evict(leaf)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
        return freed

    def reset(self) -> None:
        """`/flush_cache`: an empty tree (SGLang's `reset()`; only when nothing holds a lock)."""
        self.__init__()  # type: ignore[misc]

    def _leaves(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                yield node

    def _split(self, child: Node, k: int) -> Node:
        """0.5.23 `radix_cache.py::_split_node`: the first `k` tokens become a new parent."""
        parent = child.parent
        assert parent is not None
        head = Node(child.key[:k], parent, lock_ref=child.lock_ref, ready_at=child.ready_at)
        head.last_access = child.last_access
        child.key = child.key[k:]
        child.parent = head
        head.children[child.key[0]] = child
        parent.children[head.key[0]] = head
        return head


def _common(key: tuple[int, ...], ids: Sequence[int], start: int) -> int:
    """Length of the common prefix of `key` and `ids[start:]`."""
    n = min(len(key), len(ids) - start)
    if tuple(ids[start : start + n]) == key[:n]:
        return n
    k = 0
    while k < n and key[k] == ids[start + k]:
        k += 1
    return k
