"""0.5.23's `mem_fraction_static` when `--mem-fraction-static` is unset, from the flags as given.

SGLang's memory hook runs before speculation's reset of `max_running_requests`, so the decode
CUDA-graph batch it reserves for is the one the flags ask for (`harness.sglang.memory` holds the
formula, its constants and their sources); the prefill graphs' batch is the chunked prefill
size as `memory_hook.py` caps it.
"""

from __future__ import annotations

from typing import Any

from harness.sglang import memory


def fraction_default(
    args: dict[str, Any], given_max_running: int | None, architecture: str, gpu_mib: float
) -> float:
    """0.5.23's fraction when --mem-fraction-static is unset (harness.sglang.memory), from the
    flags as given: the hook runs before speculation's reset of max_running_requests."""
    arch = memory.architecture(architecture)
    decode_off = args["disable_cuda_graph"] or args["cuda_graph_backend_decode"] == "disabled"
    prefill_off = args["disable_cuda_graph"] or args["cuda_graph_backend_prefill"] == "disabled"
    decode = memory.decode_graph_max_bs(
        args["cuda_graph_max_bs_decode"], args["sim_requested_graph_max_bs"], given_max_running
    )
    if args["cuda_graph_bs_decode"]:
        decode = max(args["cuda_graph_bs_decode"])
    prefill = None
    if not prefill_off:
        prefill = args["cuda_graph_bs_prefill"] or memory.prefill_graph_batch_sizes(
            _prefill_graph_max_bs(args, arch)
        )
    return memory.auto_mem_fraction(
        gpu_mib,
        args["tp_size"],
        args["chunked_prefill_size"],
        arch,
        None if decode_off else decode,
        prefill,
        vlm=not args["language_model_only"],
    )


def _prefill_graph_max_bs(args: dict[str, Any], arch: memory.Architecture) -> int:
    """memory_hook.py: the chunked prefill size (at most 8192 for MLA), capped by
    --max-total-tokens and, for Llama-2 paths, 4096."""
    if args["cuda_graph_max_bs_prefill"] is not None:
        return args["cuda_graph_max_bs_prefill"]
    chunked = args["chunked_prefill_size"]
    max_bs = min(8192, chunked) if arch.mla else chunked
    if args["max_total_tokens"] is not None:
        max_bs = min(max_bs, args["max_total_tokens"])
    if "llama-2" in args["model_path"].lower():
        max_bs = min(max_bs, 4096)
    return max_bs
