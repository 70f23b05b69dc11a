"""SGLang's GPU memory defaults: the `mem_fraction_static` it picks when `--mem-fraction-static`
is unset, the KV budget a multimodal model keeps back, and the text it fails with when the
loaded weights leave nothing for the KV cache.

0.5.23 (all paths under `sglang/srt/`):

    reserved = 512 + max(chunked_prefill_size, 2048) * 1.5 + tp * pp / 8 * 1024
               + reserve_for_graph_mb                       (arg_groups/memory_hook.py)
    reserve_for_graph_mb = decode max_bs * 2                (decode graphs on)
                         + 1536 for an MLA model, else 8 * len(prefill graph batch sizes)
                                                            (prefill graphs on)
    reserved = max(reserved, 10 * 1024) on a GPU over 60 GiB
    fraction = round((gpu - reserved) / gpu, 3)
    fraction *= 0.95 * clamp(1 - 0.1 * (L * H**2 / (24 * 1024**2) - 1), 0.8, 1.05)
               for a multimodal model (adjust_mem_fraction_for_vlm; L, H: its vision tower's
               num_hidden_layers and hidden_size), unrounded

The hook runs before the speculative one (arg_groups/pipeline.py), so the decode max_bs is
clamped to `--max-running-requests` only when that flag was given, never to speculation's 48.
A multimodal model then keeps `SGLANG_VLM_CACHE_SIZE_MB` (environ.py: 100) of the KV budget for
its embedding cache, whatever the fraction (mem_cache/kv_cache_configurator.py::
mm_runtime_reservation_gb), and fails after weight loading when nothing is left
(`_profile_available_bytes`: `weights_leave_no_kv_cache`).

0.5.1.post3 (server_args.py::__post_init__): a reserve by GPU size, 2 GiB more with speculation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# environ.py: SGLANG_VLM_CACHE_SIZE_MB = EnvInt(100)
VLM_CACHE_ENV = "SGLANG_VLM_CACHE_SIZE_MB"
VLM_CACHE_DEFAULT_MIB = 100
MLA_PREFILL_GRAPH_RESERVE_MIB = 1.5 * 1024  # memory_hook.py::reserve_for_graph_mb
PREFILL_GRAPH_MIB_PER_SIZE = 8  # the same, non-MLA: per captured prefill batch size
# kv_cache_configurator.py::mm_runtime_reservation_gb's INFO line (%.2f: GB)
MULTIMODAL_RESERVE_LINE = (
    "Reserving %.2f GB of the KV budget for post-sizing multimodal allocations "
    "(feature-transport pools + embedding cache)."
)


@dataclass(frozen=True)
class Architecture:
    """What SGLang 0.5.23 decides from a checkpoint's `architectures[0]` for memory."""

    mla: bool  # configs/model_config.py: attention_arch == AttentionArch.MLA
    multimodal: bool  # configs/model_config.py::multimodal_model_archs
    # The vision tower's num_hidden_layers and hidden_size (multimodal only).
    vision_layers: int = 24
    vision_hidden: int = 1024
    # server_args.py::LANGUAGE_MODEL_ONLY_ARCHITECTURES: --language-model-only accepted.
    language_model_only: bool = False


# The architectures the shipped configurations use (0.5.23 configs/model_config.py). Kimi-K2.5's
# vision tower is configs/kimi_k25.py::KimiK25VisionConfig's defaults: 27 layers of 1152.
ARCHITECTURES: Mapping[str, Architecture] = {
    "KimiK25ForConditionalGeneration": Architecture(
        mla=True, multimodal=True, vision_layers=27, vision_hidden=1152
    ),
    "DeepseekV3ForCausalLM": Architecture(mla=True, multimodal=False),
    "LlamaForCausalLM": Architecture(mla=False, multimodal=False),
}
PLAIN = Architecture(mla=False, multimodal=False)

# server_args.py::LANGUAGE_MODEL_ONLY_ARCHITECTURES (0.5.23), in its order.
LANGUAGE_MODEL_ONLY_ARCHITECTURES = (
    "DeepseekV4ForCausalLM",
    "MuseGlimmerForConditionalGeneration",
    "Cosmos3ForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration",
)


def architecture(name: str) -> Architecture:
    """SGLang's memory facts for `name` (an architecture not listed: dense, text only)."""
    return ARCHITECTURES.get(name, PLAIN)


def language_model_only_refusal(name: str) -> str:
    """0.5.23 arg_groups/model_hook.py::handle_language_model_only, for an unsupported arch."""
    return (
        f"--language-model-only does not support {[name]}. "
        f"Supported: {list(LANGUAGE_MODEL_ONLY_ARCHITECTURES)}."
    )


def prefill_graph_batch_sizes(max_bs: int) -> list[int]:
    """0.5.23 arg_groups/cuda_graph_hook.py::generate_prefill_cuda_graph_batch_sizes."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_bs + 1, 512),
    ]
    return [s for s in sizes if s <= max_bs]


def decode_graph_max_bs(
    default_max_bs: int, given_max_bs: int | None, max_running: int | None
) -> int:
    """The decode max_bs the memory hook reserves for: the GPU-size default clamped to
    --max-running-requests only when that flag was given and max_bs was not."""
    if given_max_bs is not None:
        return given_max_bs
    if max_running is not None and default_max_bs > max_running:
        return max_running
    return default_max_bs


def vlm_factor(arch: Architecture) -> float:
    """0.5.23 memory_hook.py::adjust_mem_fraction_for_vlm: the ViT-L/14 baseline is 24 x 1024."""
    ratio = arch.vision_layers * arch.vision_hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def graph_reserve_mib(
    arch: Architecture, decode_max_bs: int | None, prefill_sizes: list[int] | None
) -> float:
    """memory_hook.py::reserve_for_graph_mb (no DP attention, no DeepEP); None: that phase's
    graphs are disabled."""
    reserved = 0.0
    if decode_max_bs is not None:
        reserved += decode_max_bs * 2
    if prefill_sizes is not None:
        if arch.mla:
            reserved += MLA_PREFILL_GRAPH_RESERVE_MIB
        else:
            reserved += len(prefill_sizes) * PREFILL_GRAPH_MIB_PER_SIZE
    return reserved


def auto_mem_fraction(
    gpu_mib: float,
    tp: int,
    chunked: int,
    arch: Architecture,
    decode_max_bs: int | None,
    prefill_sizes: list[int] | None,
    vlm: bool = True,
) -> float:
    """0.5.23's mem_fraction_static when the flag is unset (the module docstring). `vlm`: the
    multimodal factor applies (not with --language-model-only)."""
    reserved = 512 + max(chunked, 2048) * 1.5 + tp / 8 * 1024
    reserved += graph_reserve_mib(arch, decode_max_bs, prefill_sizes)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    if arch.multimodal and vlm:
        fraction *= vlm_factor(arch)
    return fraction


def auto_mem_fraction_0_5_1(gpu_mib: float, tp: int, speculative: bool) -> float:
    """SGLang 0.5.1.post3 server_args: a reserve by GPU size, 2 GiB more with speculation."""
    reserved = (12 + tp / 2) * 1024 if gpu_mib < 160 * 1024 else (16 + tp / 2) * 1024
    if speculative:
        reserved += 2 * 1024  # draft model and larger CUDA-graph buffers
    return round((gpu_mib - reserved) / gpu_mib, 3)


def multimodal_kv_reserve_mib(arch: Architecture, env: Mapping[str, str]) -> float:
    """The KV budget a multimodal model keeps back (kv_cache_configurator.py::
    mm_runtime_reservation_gb; no CUDA-IPC feature transport), at any fraction."""
    if not arch.multimodal:
        return 0.0
    return float(int(env.get(VLM_CACHE_ENV, VLM_CACHE_DEFAULT_MIB)))


def weights_leave_no_kv_cache(mem_fraction: float, available_mib: float, pre_mib: float) -> str:
    """0.5.23 kv_cache_configurator.py::_profile_available_bytes's ValueError: `available` is
    the free memory after the weights (target and draft) loaded, `pre` before."""
    minimum = 1 - available_mib / pre_mib
    suggested = math.ceil(minimum * 1000) / 1000
    return (
        f"Loaded weights leave no GPU memory for the KV cache under "
        f"--mem-fraction-static={mem_fraction}. "
        f"Raise --mem-fraction-static above {suggested:.3f} "
        f"(minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative "
        f"decoding, draft weights are now counted."
    )
