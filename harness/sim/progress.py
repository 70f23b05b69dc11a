"""Start-up progress as SGLang prints it: tqdm bars redrawn with `\\r`, graph captures, timings.

The weight loader's bar uses SGLang's own format (0.5.23 `utils/common.py::BAR_FORMAT`: "{desc}:
{percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]", desc
"Loading safetensors checkpoint shards", `model_loader/weight_utils.py`); the decode graph
runner's bar is tqdm's default ("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [...]",
desc "Capturing batches (bs=N avail_mem=X GB)", `runner/decode_cuda_graph_runner.py`). tqdm
writes to stderr, each redraw as "\\r" + the meter with no newline, and a newline when it closes.
Time shown and slept is the virtual clock's: at clock_scale S a bar takes 1/S of its seconds.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence

from harness.sim.model.perf_model import Speculation

log = logging.getLogger("sglang.launch_server")

SHARDS_DESC = "Loading safetensors checkpoint shards"
SHARD_GB = 9.1  # about one safetensors file of a large checkpoint (Kimi-K2.5: 64 files)


def _interval(seconds: float) -> str:
    """tqdm's format_interval: [H:]MM:SS."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def meter(desc: str, n: int, total: int, elapsed_s: float, sglang_format: bool) -> str:
    """One drawing of a bar, as tqdm's format_meter draws it (not a terminal: no width)."""
    pct = 100.0 * n / total if total else 100.0
    rate = n / elapsed_s if n and elapsed_s > 0 else None
    if rate is None:
        rate_fmt, remaining = "?it/s", "?"
    else:
        rate_fmt = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
        remaining = _interval((total - n) / rate)
    tail = f"{n}/{total} [{_interval(elapsed_s)}<{remaining}, {rate_fmt}]"
    if sglang_format:
        return f"{desc}: {pct:3.0f}% Completed | {tail}"
    filled = int(10 * n / total) if total else 10
    return f"{desc}: {pct:3.0f}%|{'█' * filled}{' ' * (10 - filled)}| {tail}"


def draw_bar(
    desc: str,
    total: int,
    seconds: float,
    scale: float,
    *,
    sglang_format: bool = True,
    stop_after: int | None = None,
    descs: Sequence[str] | None = None,
) -> None:
    """Draw a bar over `seconds` of virtual time; with `stop_after`, stop redrawing after that
    many steps and hang (a stuck filesystem: alive, silent, never done)."""
    out = sys.stderr
    step_s = seconds / max(total, 1)
    out.write("\r" + meter(descs[0] if descs else desc, 0, total, 0.0, sglang_format))
    out.flush()
    for n in range(1, total + 1):
        if stop_after is not None and n > stop_after:
            while True:
                time.sleep(3600)
        time.sleep(step_s / scale)
        label = descs[min(n, len(descs) - 1)] if descs else desc
        out.write("\r" + meter(label, n, total, n * step_s, sglang_format))
        out.flush()
    out.write("\n")
    out.flush()


def shard_count(weights_gb: float) -> int:
    return max(1, min(64, round(weights_gb / SHARD_GB)))


def capture_descs(batch_sizes: Sequence[int], avail_gb: float, graph_gb: float) -> list[str]:
    """The capture bar's descriptions: the runner captures the largest batch first and sets
    "Capturing batches (bs=N avail_mem=X GB)" before each, memory going down as it goes."""
    order = list(reversed(batch_sizes))
    step = graph_gb / max(len(order), 1)
    return [
        f"Capturing batches (bs={bs} avail_mem={avail_gb - i * step:.2f} GB)"
        for i, bs in enumerate(order)
    ]


def capture_graphs(
    spec: Speculation | None,
    args: dict,
    bs: list[int],
    avail: float,
    graph_gb: float,
    graph_s: float,
    scale: float,
    fail_if_due: Callable[[], None],
) -> dict[str, float]:
    """0.5.23's captures (`model_runner_components/cuda_graph_setup.py::capture_decode_graph`,
    `speculative/eagle_worker_v2.py`): the target's decode graph (its verify graph with
    speculation), then the draft's decode (more than one step) and extend graphs, each with its
    begin line, its "Capturing batches" bar and its end line; the end line of a failed capture
    never comes (the failure is raised after the target's bar)."""
    backend = args.get("cuda_graph_backend_decode") or "full"
    if spec is None:
        plan = [("target decode", "decode", 1.0, 1)]
    else:
        plan = [("target verify", "target_verify", 0.6, spec.draft_tokens)]
        if spec.steps > 1:
            plan.append(("draft decode", "draft_decode", 0.25, spec.topk))
        plan.append(("draft extend", "draft_extend", 0.15, spec.draft_tokens))
    total = sum(share for _, _, share, _ in plan)
    graphs: dict[str, float] = {}
    for i, (name, phase, share, per_req) in enumerate(plan):
        seconds, mem = graph_s * share / total, graph_gb * share / total
        extra = f"bs={bs}, " if name.startswith("draft") else ""
        log.info(
            "Capture %s CUDA graph begin. backend=%s, num_tokens_per_req=%d, %savail mem=%.2f GB",
            name,
            backend,
            per_req,
            extra,
            avail,
        )
        descs = capture_descs(bs, avail, mem)
        draw_bar("", len(bs), seconds, scale, sglang_format=False, descs=descs)
        if i == 0:
            fail_if_due()
        bs_part = "" if name.startswith("draft") else f"bs={bs}, "
        log.info(
            "Capture %s CUDA graph end. %selapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB.",
            name,
            bs_part,
            seconds,
            mem,
            avail - mem,
        )
        avail -= mem
        graphs[phase] = round(seconds, 2)
    return graphs


def startup_time(legacy: bool, load_s: float, kv_s: float, graphs: dict[str, float]) -> dict | None:
    """0.5.23's `startup_time` (`observability/startup_time.py::build_engine_startup_time`, the
    phases `metrics_collector.py::emit_startup_time` exports), logged as `entrypoints/engine.py::
    _set_startup_time` logs it. The HTTP server's own start and warm-up come after it."""
    if legacy:
        return None
    keys = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
    cuda_graph = {key: graphs.get(key, 0.0) for key in keys}
    scheduler = round(load_s + kv_s + sum(cuda_graph.values()), 2)
    startup = {
        "load_weight": round(load_s, 2),
        "kv_cache_allocation": round(kv_s, 2),
        "scheduler_e2e": scheduler,
        "cuda_graph": cuda_graph,
        "tokenizer_e2e": scheduler,
    }
    log.info(
        "Engine startup timings (s): load_weight=%.2f, kv_cache_allocation=%.2f, "
        "scheduler_e2e=%.2f, cuda_graph={%s}, tokenizer_e2e=%.2f",
        startup["load_weight"],
        startup["kv_cache_allocation"],
        startup["scheduler_e2e"],
        ", ".join(f"{k}={v:.2f}" for k, v in cuda_graph.items()),
        startup["tokenizer_e2e"],
    )
    return startup
