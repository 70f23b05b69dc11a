"""Which attention backend SGLang runs when `--attention-backend` is not given.

The backend decides the kernels a verify step runs, and SGLang chooses it from the GPU, the
model's attention and the speculative settings, so two configurations of one sweep can run on
different kernels: on Hopper an MHA model (Llama) verifies a chain with fa3 and a tree with
FlashInfer. A trial records the backend it ran on (`effective.attention_backend`).

Where each version decides, and how it says so:
- 0.5.23 resolves it with the server's arguments, before the speculative settings are resolved
  (`srt/arg_groups/pipeline.py`: `handle_attention_backend_compatibility` runs before
  `handle_speculative_decoding`, so topk is read as given), in
  `srt/arg_groups/overrides.py::_attention_backend_default` with
  `srt/arg_groups/model_override_base.py::get_default_attn_backend`; /server_info then reports
  it, and the launcher logs "Attention backend not specified. Use {backend} backend by default."
  (INFO). The DeepSeek family's own override picks `trtllm_mla` on sm100
  (`model_overrides/deepseek_v2.py`), before the default and without that line.
- 0.5.1.post3 resolves it when each TP worker loads the model
  (`srt/model_executor/model_runner.py::model_specific_adjustment`, after the speculative
  settings), logs "Attention backend not explicitly specified. Use {backend} backend by
  default." there, and /get_server_info keeps the flag as given (`dataclasses.asdict` of the
  launcher's arguments, which the worker's copy does not change): None. The log line is the
  only place that version says it.

Both: a prefill backend equal to the decode backend becomes the backend, without a line. The
rules below cover the GPUs the simulator imitates, Hopper (sm90, with CUDA 12.3 or later, which
both versions check before fa3) and the RTX PRO 6000 (sm120), for MLA and MHA models without
attention sinks; sm100 and other devices are SGLang's to say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.sglang import memory

HOPPER, BLACKWELL_WORKSTATION = "sm90", "sm120"
COMPUTES = (HOPPER, BLACKWELL_WORKSTATION)
# 0.5.1.post3 `srt/utils.py::is_fa3_default_architecture`: the MHA models fa3 is the default for
# on Hopper (0.5.23 dropped the list: every MHA model without attention sinks).
FA3_DEFAULT_ARCHITECTURES_0_5_1 = (
    "Qwen2ForCausalLM",
    "Llama4ForConditionalGeneration",
    "LlamaForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4vMoeForConditionalGeneration",
    "Step3VLForConditionalGeneration",
)
DEFAULT_LINE = "Attention backend not specified. Use {backend} backend by default."
DEFAULT_LINE_0_5_1 = "Attention backend not explicitly specified. Use {backend} backend by default."
_DEFAULT_LINE = re.compile(r"Attention backend not (?:explicitly )?specified\. Use (\S+) backend")


def _chain_or_plain(topk: int | None, page_size: int | None) -> bool:
    """`is_no_spec_infer_or_topk_one` (both versions): no topk, or topk 1 at page 1."""
    return topk is None or (topk == 1 and page_size in (None, 1))


def default_backend(
    compute: str,
    mla: bool,
    architecture: str,
    topk: int | None,
    page_size: int | None = None,
    legacy: bool = False,
) -> str:
    """The backend SGLang picks without `--attention-backend` (`legacy`: 0.5.1.post3's rule).
    `topk` as SGLang reads it then: as given in 0.5.23, resolved in 0.5.1.post3."""
    if compute not in COMPUTES:
        raise ValueError(f"compute {compute!r}: the rules here cover {', '.join(COMPUTES)}")
    hopper = compute == HOPPER
    if mla:  # fa3 on Hopper, FlashInfer on sm100, Triton otherwise (sm120 included)
        return "fa3" if hopper else "triton"
    fa3_model = not legacy or architecture in FA3_DEFAULT_ARCHITECTURES_0_5_1
    if hopper and fa3_model and _chain_or_plain(topk, page_size):
        return "fa3"
    return "flashinfer"


def default_line(backend: str, legacy: bool = False) -> str:
    return (DEFAULT_LINE_0_5_1 if legacy else DEFAULT_LINE).format(backend=backend)


def parse_default_line(log_text: str) -> str | None:
    """The backend a server's log says it chose by default (either version's line), or None."""
    match = _DEFAULT_LINE.search(log_text)
    return match.group(1) if match else None


def resolved_default(
    args: Mapping[str, Any], architecture: str, compute: str | None, legacy: bool = False
) -> str | None:
    """The default for parsed server arguments (`vars(namespace)`) of a model `architecture`;
    None when a backend is given or the GPU is not known."""
    if compute is None or args.get("attention_backend") is not None:
        return None
    mla = memory.architecture(architecture).mla
    topk, page = args.get("speculative_eagle_topk"), args.get("page_size")
    return default_backend(compute, mla, architecture, topk, page, legacy)
