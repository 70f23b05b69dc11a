"""`--device cpu`: SGLang 0.5.23's CPU engine (`SGLANG_USE_CPU_ENGINE=1`), as real SGLang shows it
on a CPU without AMX (docs/real-sglang.md; the texts from its wheel: `arg_groups/platform_hook.py`,
`arg_groups/overrides.py`, `arg_groups/cuda_graph_hook.py`, `arg_groups/speculative_hook.py`,
`speculative/draft_utils.py`).

The attention backend SGLang picks there is `intel_amx`, which falls back to `torch_native` with
a warning; no graph is captured (its batch lines say `cpu graph: False`), while
`cuda_graph_config` still reports a decode batch of `torch_compile_max_bs` (32) and prefill
disabled; the prefill chunk is 4096. A speculative launch turns the overlap schedule off with a
warning, loads both models and dies creating its KV pools: SGLang's draft backends have no
`torch_native` entry, and its CPU one (`intel_amx`) needs AMX. The simulator models the time and
memory of its GPU profiles, not a CPU's; this module gives it the CPU's surface only.
"""

from __future__ import annotations

from typing import Any

CPU = "cpu"
AMX_FALLBACK = (
    "The current platform does not support Intel AMX, will fallback to torch_native backend."
)
CPU_OVERLAP = "Overlap schedule is not implemented for speculative decoding on CPU."
TORCH_COMPILE_MAX_BS = 32  # 0.5.23's default; the CPU's graph batch sizes stop there
CPU_CHUNKED_PREFILL = 4096


def on_cpu(args: dict[str, Any]) -> bool:
    return args.get("device") == CPU


def resolve_backends(args: dict[str, Any], warn) -> None:
    """Before the speculative settings (topk is checked against the backend)."""
    if args["attention_backend"] is None or args["attention_backend"] == "intel_amx":
        args["attention_backend"] = "torch_native"
        warn(AMX_FALLBACK)
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = CPU_CHUNKED_PREFILL


def resolve_graphs(args: dict[str, Any], warn) -> None:
    """After the rest: what cuda_graph_config reports, and the overlap schedule a speculative
    launch cannot have on a CPU."""
    if args["sim_requested_graph_max_bs"] is None:
        args["cuda_graph_max_bs_decode"] = TORCH_COMPILE_MAX_BS
    args["cuda_graph_backend_prefill"] = "disabled"
    if args["speculative_algorithm"] and not args["disable_overlap_schedule"]:
        args["disable_overlap_schedule"] = True
        warn(CPU_OVERLAP)


def speculation_refusal(args: dict[str, Any]) -> str | None:
    """The exception a speculative launch on a CPU dies with once both models are loaded."""
    if not on_cpu(args) or not args.get("speculative_algorithm"):
        return None
    backend = args["attention_backend"]
    return f"ValueError: EAGLE is not supported in decode attention backend {backend}"
