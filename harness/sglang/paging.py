"""The KV cache's page size: what SGLang 0.5.23 chooses and which backends force it up.

`--page-size` defaults to None (0.5.23 `srt/arg_groups/fields/schedule.py`, resolvable) and
runs at 1 unless something raises it. Three MLA attention backends do: 0.5.23
`srt/arg_groups/overrides.py::_mla_backend_page_constraints` sets page 64 for `flashmla` (always,
"FlashMLA only supports a page_size of 64") and for `trtllm_mla` and `cutedsl_mla` when the page
is not 32 or 64 (checked on --attention-backend and --decode-attention-backend; cutedsl_mla also
on --prefill-attention-backend). Which backend a DeepSeek-family model (Kimi-K2.5's
`KimiK25ForConditionalGeneration` is registered with DeepseekV3ForCausalLM) gets by default:
0.5.23 `srt/arg_groups/model_overrides/deepseek_v2.py::_deepseek_family_overrides` picks
`trtllm_mla` on sm100 (B200/GB200) when no attention backend is given, so a B200 runs Kimi at
page 64 by default; on sm90 (H100/H200) and sm120 (RTX PRO 6000) nothing is picked there and
the page stays 1.
"""

from __future__ import annotations

# Backends that run at page 64 whatever --page-size says (unless 32, for the last two).
PAGE_64_MLA_BACKENDS = ("flashmla", "trtllm_mla", "cutedsl_mla")
FORCED_PAGE_SIZE = 64
# The flags that choose those backends (0.5.23 _mla_backend_page_constraints reads these).
ATTENTION_BACKEND_FIELDS = (
    "attention_backend",
    "decode_attention_backend",
    "prefill_attention_backend",
)
# GPU architectures whose default backend for a DeepSeek-family MLA model runs at page 64.
PAGE_64_BY_DEFAULT = ("sm100",)
