"""SGLang's admission and retraction rules over the simulated KV pool.

0.5.23 sources (all under `sglang/srt/`):
- `managers/scheduler_components/new_token_ratio_tracker.py` + `environ.py`: the ratio starts at
  `SGLANG_INIT_NEW_TOKEN_RATIO` (0.7) x `--schedule-conservativeness` (1.0), falls by
  `(init - min) / SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS` (600) per decode step that needs no
  retraction, down to `init * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR` (0.14); after a retraction it
  becomes `(decoded + SGLANG_RETRACT_DECODE_STEPS (20) * reqs) / (sum max_new_tokens + 1)` of the
  requests kept, at most 1.
- `managers/schedule_policy.py::PrefillAdder`: the budget is `available + evictable` less, per
  running request, `min(max_new_tokens - decoded, CLIP_MAX_NEW_TOKENS (4096)) * ratio` (ratio 1
  with ignore_eos); a waiting request is admitted while `uncached input + min(max_new_tokens -
  decoded, 4096) < budget` (`PrefillBudget.check_prefill`), and then takes its input plus the
  clipped max_new_tokens, unscaled, off the budget (`reserve`); requests are taken in the queue's
  order (`--schedule-policy fcfs`, the default) up to `--max-running-requests`, and a batch's
  input is bounded by `--max-prefill-tokens` / `--chunked-prefill-size` (the first request of a
  batch always goes, as a chunked prefill would split it).
- `managers/schedule_batch.py::retract_decode`: when the next decode step does not fit
  (`check_decode_mem`), requests are retracted in `_get_decode_retraction_order`: fewest decoded
  tokens first, the longest prompt first among equals, at least one, until the rest fit, never the
  last; each retraction evicts `remaining * SGLANG_RETRACT_DECODE_STEPS` tokens from the tree
  (`release_req`); retracted requests go to the back of the waiting queue
  (`scheduler.py::_add_request_to_queue(is_retracted=True)`) and are prefilled again with their
  decoded tokens as input.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.sim.capacity.kvpool import KVPool
from harness.sim.request import SimRequest

INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20
CLIP_MAX_NEW_TOKENS = 4096


class NewTokenRatio:
    def __init__(self, conservativeness: float = 1.0):
        self.init = min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        self.min = min(self.init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.decay = (self.init - self.min) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.current = self.init

    def decay_step(self) -> None:
        self.current = max(self.current - self.decay, self.min)

    def reset(self) -> None:
        self.current = self.init

    @staticmethod
    def after_retract(kept: list[SimRequest]) -> float:
        decoded = sum(r.generated for r in kept)
        max_new = sum(r.max_new_tokens for r in kept)
        return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (max_new + 1))


@dataclass
class Admitted:
    request: SimRequest
    extend: int  # tokens computed by this prefill (not cached anywhere)
    device_hit: int
    host_hit: int  # tokens loaded back from the host tier


def _remaining(r: SimRequest) -> int:
    return min(max(r.max_new_tokens - r.generated, 0), CLIP_MAX_NEW_TOKENS)


def max_new_tokens_within(
    input_len: int, max_new_tokens: int, kv_tokens: int, context_len: int | None
) -> int:
    """0.5.23 `scheduler.py::init_req_max_new_tokens` at page size 1: a request's max_new_tokens
    clipped so that it fits an empty pool (`max_req_len = min(context_len - 1, kv_tokens - 1)`,
    tp_worker.py `get_worker_info`; then the allocator's `token_capacity - input - page - 1`).
    Without it a request larger than the pool never passes PrefillAdder and waits for ever."""
    max_req_len = min(context_len - 1, kv_tokens - 1) if context_len else kv_tokens - 1
    clipped = min(max_new_tokens, max_req_len - input_len - 1, kv_tokens - input_len - 2)
    return max(0, clipped)


def select_prefill(
    pool: KVPool,
    waiting: list[SimRequest],
    running: list[SimRequest],
    ratio: float,
    *,
    max_running: int,
    max_prefill_tokens: int,
    now: float,
) -> list[Admitted]:
    """PrefillAdder over the waiting queue: pops and allocates the requests it admits."""
    clip, eos = CLIP_MAX_NEW_TOKENS, [r for r in running if r.ignore_eos]
    offset = ratio * sum(min(max(r.max_new_tokens - r.generated, 0), clip) for r in running)
    offset += (1.0 - ratio) * sum(map(_remaining, eos))
    admitted: list[Admitted] = []
    rem_input = max_prefill_tokens
    while waiting and len(running) + len(admitted) < max_running:
        r = waiting[0]
        ids = r.fill_ids()
        device, host, node = pool.match(ids, now)
        pool.tree.lock(node)  # 0.5.23 add_one_req: "The temporary pin excludes this prefix"
        new = len(ids) - device
        budget = pool.available + pool.evictable - offset
        pool.tree.unlock(node)
        if new + _remaining(r) >= budget:
            break  # AddReqResult.NO_TOKEN
        if admitted and new - host > rem_input:
            break  # AddReqResult.OTHER: this batch's input budget is spent
        waiting.pop(0)
        pool.allocate(r, ids, node)
        offset += _remaining(r)  # reserve(): the clipped max_new_tokens, unscaled
        rem_input -= new - host
        admitted.append(Admitted(r, new - host, device, host))
    return admitted


def decode_tokens(running: list[SimRequest], per_request: int) -> int:
    """`new_tokens_required_next_decode`: one slot per request (page size 1), a verify pass's
    worth with speculation."""
    return len(running) * per_request


def retract(pool: KVPool, running: list[SimRequest], per_request: int) -> list[SimRequest]:
    """`retract_decode`: the requests retracted (removed from `running`, back in no queue)."""
    order = sorted(running, key=lambda r: (r.generated, -r.prompt_tokens), reverse=True)
    retracted: list[SimRequest] = []
    first = True
    while first or not pool.ensure(decode_tokens(order, per_request)):
        if len(order) == 1:
            break
        first = False
        r = order.pop()
        pool.release(r)
        pool.ensure(len(order) * RETRACT_DECODE_STEPS)  # release_req's evict_from_tree_cache
        r.retractions += 1
        retracted.append(r)
    kept = set(map(id, order))
    running[:] = [r for r in running if id(r) in kept]
    return retracted
