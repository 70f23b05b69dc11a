"""SGLang 0.5.23's decode CUDA graphs: the batch sizes it captures, and what a batch runs as.

A decode step (a verify pass with speculation) of `b` running requests replays the graph of the
smallest captured batch size at or above `b`, its rows past `b` padding; a batch above the
largest captured size runs eager. The sizes count requests: a verify graph of batch size `bs`
holds `bs * draft tokens` token rows (`decode_cuda_graph_runner.py`, `captured_req_width`), and
the draft's decode and extend graphs pad to the same list (`eagle_draft_cuda_graph_runner.py`,
`eagle_draft_extend_cuda_graph_runner.py`, both through `get_batch_sizes_to_capture`). Each rule
names the 0.5.23 file and function it is read from (`srt/` below); no DP attention, two-batch
overlap or ragged verify (SGLANG_RAGGED_VERIFY_MODE is "static" by default), which would align
or re-key the sizes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

# arg_groups/memory_hook.py `_handle_gpu_memory_settings`: the decode max_bs when
# --cuda-graph-max-bs is unset, per GPU memory (MiB, upper bound exclusive): (tp < 4, tp >= 4).
_MAX_BS_BY_MEMORY = (
    (20 * 1024, (8, 8)),  # T4, 4080
    (35 * 1024, (48, 160)),  # A10, 4090, 5090
    (60 * 1024, (32, 160)),  # A100 40GB, L40
    (90 * 1024, (256, 512)),  # H100, A100 80GB
    (160 * 1024, (256, 512)),  # H20, H200
)
MAX_BS_LARGE_GPU = 512  # B200, MI300: 160 GiB and up, any TP


def default_decode_max_bs(gpu_mib: float, tp: int) -> int:
    """0.5.23's decode graph max_bs when the flag is unset (`memory_hook.py`, above)."""
    for bound, (small_tp, large_tp) in _MAX_BS_BY_MEMORY:
        if gpu_mib < bound:
            return small_tp if tp < 4 else large_tp
    return MAX_BS_LARGE_GPU


def listed_batch_sizes(max_bs: int, speculative: bool) -> list[int]:
    """The decode batch sizes the config lists up to `max_bs` (`arg_groups/cuda_graph_hook.py::
    generate_decode_cuda_graph_batch_sizes`): denser at small sizes with speculation ("less
    padding for smaller batch sizes"), `max_bs` itself always included."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8)]
        sizes += list(range(272, max_bs + 1, 16))
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16)]
        sizes += list(range(512, max_bs + 1, 32))
    sizes = [s for s in sizes if s <= max_bs]
    return sizes if max_bs in sizes else [*sizes, max_bs]


def captured_batch_sizes(listed: Sequence[int], request_pool: int | None) -> list[int]:
    """What the runner captures of `listed` (`model_executor/runner/base_cuda_graph_runner.py::
    get_batch_sizes_to_capture`): the sizes the request pool can fill (`req_to_token_pool.size`,
    max_running_requests), the pool's size added when the list reaches past it; sorted, unique.
    `request_pool` None: unknown, the list as it is."""
    sizes = list(listed)
    if request_pool is not None:
        if max(sizes) > request_pool:
            sizes.append(request_pool)
        sizes = [s for s in sizes if s <= request_pool]
    return sorted(set(sizes))


def decode_batch_sizes(
    max_bs: int | None,
    speculative: bool,
    request_pool: int | None = None,
    given: Sequence[int] | None = None,
) -> list[int]:
    """The decode graphs a launch captures: `given` (--cuda-graph-bs) or the listed sizes up to
    `max_bs`, then what the request pool can fill. Empty when `max_bs` is None or 0 (no graphs)."""
    if given:
        return captured_batch_sizes(given, request_pool)
    if not max_bs:
        return []
    return captured_batch_sizes(listed_batch_sizes(max_bs, speculative), request_pool)


def padded_batch(batch: int, captured: Sequence[int]) -> int | None:
    """The captured size a batch of `batch` requests replays (`base_cuda_graph_runner.py::
    _pad_to_bucket`: `bisect_left`, the smallest size at or above it), or None where it runs
    eager (`decode_cuda_graph_runner.py::can_run_graph`: above the largest, or nothing
    captured)."""
    if not captured or batch > captured[-1]:
        return None
    return captured[bisect.bisect_left(captured, batch)]
