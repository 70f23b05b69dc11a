"""SGLang log-line parsing and failure classification (the current and the 0.5.1 formats).

Formats are in shared/reference/sglang.md §4-5. SGLang's own decode-line regex expects a trailing
comma that the current surface no longer prints, so these patterns accept both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.record.results import Outcome
from harness.sglang.surfaces import READY_LINE

# Texts that mean memory ran out, by the direction the next configuration must move away from
# (docs/reliability.md cites each text's SGLang file and version).
# The KV pool (mem_fraction_static too low for weights + KV pool, or the pool full at run time):
_KV_POOL_PATTERNS = (
    re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"),
    re.compile(r"Loaded weights leave no GPU memory for the KV cache"),
    re.compile(r"(?:Prefill|Decode) out of memory\. Try to lower your batch size"),
    re.compile(r"Hybrid \(mamba/linear-attention\) state cache is too small to serve"),
    re.compile(r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache"),
    re.compile(r"SWA pool cap \(.*\) leaves no room for the full KV pool"),
    re.compile(r"\[unified-memory-pool\] .*cannot fit ONE worst-case request"),
)
# Host memory: the kernel's OOM killer SIGKILLed a scheduler (at start-up, or later as seen by
# 0.5.23's subprocess watchdog). 0.5.1: "Rank 0 scheduler is dead. ..." then "Exit code: -9".
_HOST_OOM_PATTERNS = (
    re.compile(r"scheduler died during initialization \(exit code: -9\)"),
    re.compile(r"scheduler is dead\.[^\n]*\n(?:[^\n]*\n){0,3}?[^\n]*Exit code: -9"),
    re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code -9\."),
)
# The GPU beside the static pool (activations, CUDA graphs, pools outside the fraction). A
# CUDA-graph capture failure is one only when its cause is one of these: SGLang's wrapper adds
# the "lower --mem-fraction-static" hint to any RuntimeError, an illegal memory access included.
_GPU_OOM_PATTERNS = (
    re.compile(r"CUDA out of memory", re.I),
    re.compile(r"OutOfMemoryError"),
    re.compile(r"CUDA(?: error)?\]?: out of memory"),  # the runtime's and Triton's wording
    re.compile(r"int8 mamba checkpoint pool needs .* HBM is free"),
)
_OOM_PATTERNS = (*_KV_POOL_PATTERNS, *_HOST_OOM_PATTERNS, *_GPU_OOM_PATTERNS)

# Lines after which the server is dead or dying (§5): the launcher kills its tree next. A process
# still alive a moment after one of these is a half-killed server, not a slow one.
_FATAL_PATTERNS = (
    *_OOM_PATTERNS,
    re.compile(r"Scheduler hit an exception"),
    re.compile(r"Received sigquit from a child process"),
    re.compile(r"SIGQUIT received"),
    re.compile(r"TokenizerManager hit an exception"),
    re.compile(r"Initialization failed\. Please see the error messages above"),
    re.compile(r"Capture (?:prefill )?cuda graph failed", re.I),
    re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code"),
)

# The decode stats line (reference/sglang.md §4). 0.5.23 `managers/scheduler_components/
# metrics_reporter.py::report_decode_stats` prints "Decode batch[ [iter]], #running-req: N, " then
# the pool's usage parts (`pool_stats_observer.py::PoolStats.get_decode_usage_msg_parts`: "#token"
# and "token usage" for a plain pool, "#full token"/"#swa token"/"mamba num"/"#gpu token"... for
# hybrid and HiSparse pools), the speculative parts, then "{label}: {bool}" where the label is
# "cuda graph", "cpu graph", "npu graph" or "musa graph" by device, "gen throughput (token/s)" and
# "#queue-req" (no trailing comma; 0.5.1's `scheduler_metrics_mixin.py::log_decode_stats` prints
# "Decode batch." and ends in ", "). SGLang's own `debug_utils/log_parser.py::_PATTERN_DECODE`
# wants both a plain pool and a trailing comma, so the line is read here as its "key: value" parts.
_DECODE_HEAD = re.compile(r"Decode batch(?: \[(?P<iter>\d+)\])?[.,]\s*")
_FIELD = re.compile(r"(?P<key>[^:,]+?):\s*(?P<value>[^,]*?)\s*(?:,|$)")
_GRAPH_LABEL = re.compile(r"^(?:cuda|cpu|npu|musa|\w+) graph$")
_TIMESTAMP = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)[^\]]*\]")


@dataclass(frozen=True)
class DecodeStats:
    running_req: int
    # KV tokens in use and their share of the pool; for a hybrid SWA pool the larger of the full
    # and SWA pools', as SGLang's own `PoolStats.get_kv_token_stats` counts them (mamba excluded).
    tokens: int
    token_usage: float
    accept_len: float | None
    accept_rate: float | None
    cuda_graph: bool | None  # whether the step replayed a graph, whatever the device's label
    gen_throughput: float
    queue_req: int
    timestamp: str | None = None
    forward_iter: int | None = None  # "Decode batch [N]," with SGLANG_LOG_FORWARD_ITERS=1
    graph_label: str | None = None  # "cuda graph", "cpu graph", "npu graph", "musa graph"
    swa_tokens: int | None = None  # hybrid SWA pool ("#swa token")
    swa_token_usage: float | None = None
    mamba_usage: float | None = None  # hybrid SSM pool ("mamba usage")


def _number(text: str | None, kind: type = float) -> float | int | None:
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        return None


def parse_decode_line(line: str) -> DecodeStats | None:
    head = _DECODE_HEAD.search(line)
    if not head:
        return None
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(line, head.end()):
        fields.setdefault(match.group("key").strip(), match.group("value"))
    graph_label = next((k for k in fields if _GRAPH_LABEL.match(k)), None)
    running = _number(fields.get("#running-req"), int)
    gen_tps = _number(fields.get("gen throughput (token/s)"))
    queue = _number(fields.get("#queue-req"), int)
    # A plain pool says "#token"; a hybrid one "#full token"; a HiSparse one "#gpu token".
    pool = next((p for p in ("", "full ", "gpu ") if f"#{p}token" in fields), None)
    if running is None or gen_tps is None or queue is None or pool is None:
        return None
    tokens = _number(fields[f"#{pool}token"], int)
    usage = _number(fields.get(f"{pool}token usage"))
    if tokens is None or usage is None:
        return None
    swa_tokens = _number(fields.get("#swa token"), int)
    swa_usage = _number(fields.get("swa token usage"))
    graph = fields.get(graph_label) if graph_label else None
    ts = _TIMESTAMP.match(line)
    return DecodeStats(
        running_req=int(running),
        tokens=max(int(tokens), int(swa_tokens or 0)),
        token_usage=max(float(usage), float(swa_usage or 0.0)),
        accept_len=_number(fields.get("accept len")),
        accept_rate=_number(fields.get("accept rate")),
        cuda_graph=None if graph not in ("True", "False") else graph == "True",
        gen_throughput=float(gen_tps),
        queue_req=int(queue),
        timestamp=ts.group("ts") if ts else None,
        forward_iter=int(head.group("iter")) if head.group("iter") else None,
        graph_label=graph_label,
        swa_tokens=swa_tokens,
        swa_token_usage=swa_usage,
        mamba_usage=_number(fields.get("mamba usage")),
    )


# The prefill stats line. 0.5.23 `metrics_reporter.py::report_prefill_stats`: "Prefill batch[
# [iter]], #new-seq: N, #new-token: N, #cached-token: N, " + the pool's prefill usage parts
# (`PoolStats.get_prefill_usage_msg_parts`: "token usage" for a plain pool, "full token usage"/
# "swa token usage"/"mamba usage" for hybrid ones) + "#running-req: N, #queue-req: N,
# #pending-token: N, " ... "input throughput (token/s): X"; 0.5.1 `scheduler_metrics_mixin.py::
# log_prefill_stats`: "Prefill batch. #new-seq: ..., #running-req: N, #queue-req: N, ".
_PREFILL_HEAD = re.compile(r"Prefill batch(?: \[(?P<iter>\d+)\])?[.,]\s*")


@dataclass(frozen=True)
class PrefillStats:
    new_seq: int
    new_tokens: int  # computed (not found in the radix cache): SGLang's log_input_tokens
    cached_tokens: int  # reused from the prefix cache (device and host tiers): log_hit_tokens
    token_usage: float | None
    running_req: int | None
    queue_req: int | None
    timestamp: str | None = None


def parse_prefill_line(line: str) -> PrefillStats | None:
    head = _PREFILL_HEAD.search(line)
    if not head:
        return None
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(line, head.end()):
        fields.setdefault(match.group("key").strip(), match.group("value"))
    seqs = _number(fields.get("#new-seq"), int)
    new = _number(fields.get("#new-token"), int)
    cached = _number(fields.get("#cached-token"), int)
    if seqs is None or new is None or cached is None:
        return None
    usages = [fields.get(f"{pool}token usage") for pool in ("", "full ", "swa ")]
    usages = [u for u in (_number(v) for v in usages) if u is not None]
    ts = _TIMESTAMP.match(line)
    running = _number(fields.get("#running-req"), int)
    queue = _number(fields.get("#queue-req"), int)
    return PrefillStats(
        new_seq=int(seqs),
        new_tokens=int(new),
        cached_tokens=int(cached),
        token_usage=max(usages) if usages else None,
        running_req=None if running is None else int(running),
        queue_req=None if queue is None else int(queue),
        timestamp=ts.group("ts") if ts else None,
    )


# Retraction: decode ran out of KV and SGLang sent requests back to the queue (their prefill is
# redone later). 0.5.23 `managers/scheduler.py` (update_running_batch, logger.warning): "KV cache
# pool is full. Retract requests. #retracted_reqs: N, #new_tokens_gained: N[, #mamba_num_gained:
# N], #new_token_ratio: A -> B"; 0.5.1 (logger.info) the same without #new_tokens_gained. The
# "Testing retraction. " prefix (SGLANG_TEST_RETRACT) is a debugging aid, not the pool running out.
_RETRACT = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+)")


def parse_retract_line(line: str) -> int | None:
    """The requests a retraction line sent back to the queue; None for any other line."""
    match = _RETRACT.search(line)
    return int(match.group(1)) if match else None


# The KV pool and the HiCache host pool at start-up. The pool's size: "max_total_num_tokens=N, "
# (both surfaces, managers/scheduler.py, TP rank 0). The host pool: 0.5.23
# `mem_cache/pool_host/base.py::_allocate_host_buffer`: "Allocating kv hierarchical KV host pool:
# N tokens, X GB host memory." (", packed MTP KV layers: ..." with a draft model's layers); 0.5.1
# `mem_cache/memory_pool_host.py`: "Allocating X GB host memory for hierarchical KV cache." (no
# token count: `host_pool_tokens` derives it from the device pool's bytes per token, as SGLang
# sizes the host pool: host_size * 1e9 // size_per_token). The device pool: "KV Cache is
# allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB" or "..., KV size: X GB".
_MAX_TOTAL = re.compile(r"\bmax_total_num_tokens=(\d+)")
_HOST_POOL = re.compile(
    r"Allocating (?P<label>\w+) hierarchical KV host pool: (?P<tokens>\d+) tokens, "
    r"(?P<gb>[0-9.]+) GB host memory"
)
_HOST_POOL_LEGACY = re.compile(
    r"Allocating (?P<gb>[0-9.]+) GB host memory for hierarchical KV cache"
)
_KV_ALLOCATED = re.compile(
    r"KV Cache is allocated\..*?#tokens: (?P<tokens>\d+), "
    r"(?:K size: (?P<k>[0-9.]+) GB, V size: (?P<v>[0-9.]+) GB|KV size: (?P<kv>[0-9.]+) GB)"
)


@dataclass(frozen=True)
class PoolSizes:
    """What a server's start-up log says about its KV pools (None: not printed)."""

    max_total_num_tokens: int | None = None
    host_tokens: int | None = None  # the HiCache host pool, in tokens (0.5.23 prints it)
    host_gb: float | None = None
    device_tokens: int | None = None  # "KV Cache is allocated" (per TP rank)
    device_gb: float | None = None


def parse_pool_sizes(log_text: str) -> PoolSizes:
    """The first of each start-up line in `log_text`. The host pool is the target's KV pool:
    label "kv" (a hybrid model's "full"), not its "swa" or "draft" pools (one line per label)."""
    max_total = _MAX_TOTAL.search(log_text)
    host = [m for m in _HOST_POOL.finditer(log_text) if m.group("label") in ("kv", "full")]
    legacy = _HOST_POOL_LEGACY.search(log_text)
    device = _KV_ALLOCATED.search(log_text)
    device_gb = None
    if device:
        parts = [device.group(k) for k in ("k", "v", "kv") if device.group(k)]
        device_gb = sum(float(p) for p in parts)
    host_gb = float(host[0].group("gb")) if host else float(legacy.group("gb")) if legacy else None
    return PoolSizes(
        max_total_num_tokens=int(max_total.group(1)) if max_total else None,
        host_tokens=int(host[0].group("tokens")) if host else None,
        host_gb=host_gb,
        device_tokens=int(device.group("tokens")) if device else None,
        device_gb=device_gb,
    )


def host_pool_tokens(sizes: PoolSizes) -> int | None:
    """The host pool in tokens: as printed (0.5.23), else its GB over the device pool's bytes
    per token (0.5.1: SGLang sizes the host pool with the same size_per_token)."""
    if sizes.host_tokens is not None:
        return sizes.host_tokens
    if sizes.host_gb is None or not sizes.device_tokens or not sizes.device_gb:
        return None
    return int(sizes.host_gb * sizes.device_tokens / sizes.device_gb)


def is_ready_line(line: str) -> bool:
    return READY_LINE in line


def is_fatal_line(line: str) -> bool:
    return any(p.search(line) for p in _FATAL_PATTERNS)


def mentions_oom(text: str) -> bool:
    return any(p.search(text) for p in _OOM_PATTERNS)


def oom_kind(text: str) -> str | None:
    """Which way memory ran out: the direction the next configuration must move away from."""
    if any(p.search(text) for p in _KV_POOL_PATTERNS):
        return "kv_pool"  # mem_fraction_static too low: the KV pool is too small
    if any(p.search(text) for p in _HOST_OOM_PATTERNS):
        return "host"  # the OOM killer: host memory (the HiCache pool) ran out
    if any(p.search(text) for p in _GPU_OOM_PATTERNS):
        return "gpu"  # activations / CUDA graphs did not fit beside the static pool
    return None


# A speculative launch that dies at start-up because this SGLang build has no speculative path on
# this device, whatever the configuration: SGLang's own refusal (0.5.23 speculative/draft_utils.py:
# the draft backend maps have no entry for the decode backend it runs, torch_native on a CPU
# without AMX), a CPU kernel missing from the kernel library (torch.ops.sgl_kernel has no such
# op), or the real-engine environment's stand-in for that library (tests/real/standins: the
# registries have no CPU build of it), called from the KV pool's set-up
# (mem_cache/memory_pool.py _init_kv_copy_and_warmup -> copy_all_layer_kv_cache_cpu).
_NO_SPECULATION_PATTERNS = (
    re.compile(r"EAGLE is not supported in (?:decode|prefill) attention backend \w+"),
    re.compile(r"'_OpNamespace' 'sgl_kernel' object has no attribute '\w+'"),
    re.compile(r"StandInCalled: sgl_kernel\.\w+ was called"),
)
NO_SPECULATION = "no_speculation"


def crash_cause(log_text: str, speculative: bool) -> tuple[str, str] | None:
    """(cause, the line that shows it) when a crash is the engine build's, not the
    configuration's; None otherwise. Only a speculative launch can fail for want of speculation:
    a plain server's log may list missing kernels of models it never loads."""
    if not speculative:
        return None
    for line in log_text.splitlines():
        if "Ignore import error" in line:  # SGLang's model registry skipping other models
            continue
        for pattern in _NO_SPECULATION_PATTERNS:
            if match := pattern.search(line):
                return NO_SPECULATION, match.group(0)
    return None


def classify_exit(log_text: str, returncode: int | None) -> Outcome:
    """Why did a server stop on its own? Memory text wins over everything else; anything else
    (a capture failure with another cause, a scheduler killed by another signal) is a crash."""
    if mentions_oom(log_text):
        return Outcome.OOM
    return Outcome.CRASH


def excerpt(log_text: str, lines: int = 30) -> str:
    """The last lines of a log, plus the first OOM line if it scrolled out of them."""
    # A tqdm bar is one line of carriage-return redraws: keep its last drawing, as a terminal.
    all_lines = [_last_drawn(line) for line in log_text.rstrip("\n").split("\n")]
    tail = all_lines[-lines:]
    oom_lines = [ln for ln in all_lines if mentions_oom(ln)]
    if oom_lines and oom_lines[0] not in tail:
        tail = [oom_lines[0], "...", *tail]
    return "\n".join(tail)


def _last_drawn(line: str) -> str:
    drawn = [part for part in line.split("\r") if part.strip()]
    return drawn[-1] if drawn else ""
