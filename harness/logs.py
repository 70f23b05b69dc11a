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

_DECODE = re.compile(
    r"Decode batch[.,].*?#running-req:\s*(?P<running>\d+),\s*#token:\s*(?P<tokens>\d+),\s*"
    r"token usage:\s*(?P<usage>[\d.]+),\s*"
    r"(?:accept len:\s*(?P<accept_len>[\d.]+),\s*)?"
    r"(?:accept rate:\s*(?P<accept_rate>[\d.]+),\s*)?"
    r"(?:.*?cuda graph:\s*(?P<cuda_graph>True|False),\s*)?"
    r"gen throughput \(token/s\):\s*(?P<gen_tps>[\d.]+),\s*#queue-req:\s*(?P<queue>\d+)"
)
_TIMESTAMP = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)[^\]]*\]")


@dataclass(frozen=True)
class DecodeStats:
    running_req: int
    tokens: int
    token_usage: float
    accept_len: float | None
    accept_rate: float | None
    cuda_graph: bool | None
    gen_throughput: float
    queue_req: int
    timestamp: str | None = None


def parse_decode_line(line: str) -> DecodeStats | None:
    match = _DECODE.search(line)
    if not match:
        return None
    ts = _TIMESTAMP.match(line)
    g = match.groupdict()
    return DecodeStats(
        running_req=int(g["running"]),
        tokens=int(g["tokens"]),
        token_usage=float(g["usage"]),
        accept_len=float(g["accept_len"]) if g["accept_len"] else None,
        accept_rate=float(g["accept_rate"]) if g["accept_rate"] else None,
        cuda_graph=None if g["cuda_graph"] is None else g["cuda_graph"] == "True",
        gen_throughput=float(g["gen_tps"]),
        queue_req=int(g["queue"]),
        timestamp=ts.group("ts") if ts else None,
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
