"""SGLang log-line parsing and failure classification (the current and the 0.5.1 formats).

Formats are in shared/reference/sglang.md §4-5. SGLang's own decode-line regex expects a trailing
comma that the current surface no longer prints, so these patterns accept both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.results import Outcome
from harness.sglang import READY_LINE

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


def classify_exit(log_text: str, returncode: int | None) -> Outcome:
    """Why did a server stop on its own? Memory text wins over everything else; anything else
    (a capture failure with another cause, a scheduler killed by another signal) is a crash."""
    if mentions_oom(log_text):
        return Outcome.OOM
    return Outcome.CRASH


def excerpt(log_text: str, lines: int = 30) -> str:
    """The last lines of a log, plus the first OOM line if it scrolled out of them."""
    all_lines = log_text.rstrip("\n").splitlines()
    tail = all_lines[-lines:]
    oom_lines = [ln for ln in all_lines if mentions_oom(ln)]
    if oom_lines and oom_lines[0] not in tail:
        tail = [oom_lines[0], "...", *tail]
    return "\n".join(tail)
