"""What the harness reads from a server, in one place, and the check of a ready server against it.

specsweep parses SGLang's /server_info fields, /metrics names and log lines as the releases in
`harness.sglang.surfaces.RELEASES_READ` print them. A release not read (a newer SGLang on the same
flag surface) may have renamed or dropped any of them, and a reader that finds nothing falls back
quietly (an effective arg unrecorded, an accept length from a poorer source, a pool size unknown).
So once a server is ready `surface_mismatches` compares what it offers with `NEEDS` and names
every need it lacks; the trial records them (`TrialResult.surface_mismatches`, warning
`sglang_surface_mismatch`).

`NEEDS` is the list: each entry says where it is read, by whom and when it is there. Entries with
`at_ready=False` appear only once something happened (a retraction, a prefix hit, a decode log
line, a verify step), so a server that has only warmed up cannot be held to them; they are listed
so that this stays the whole list (tests/unit/test_surface_check.py greps the readers' `sglang:`
names against it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from harness.measure.prometheus import prometheus_values
from harness.server.logs import is_ready_line, parse_pool_sizes
from harness.sglang.surfaces import READY_LINE, RELEASES_READ, release_read, surface
from harness.tls import tls_context

log = logging.getLogger(__name__)

SERVER_INFO, METRICS, LOG = "/server_info", "/metrics", "server.log"


@dataclass(frozen=True)
class Need:
    """One thing the harness reads. `only`: "speculative" or "hicache" (needed only then);
    `surface`: "current" or "legacy" (one surface's name; None: both)."""

    where: str  # SERVER_INFO, METRICS or LOG
    name: str  # the field, the metric, or (LOG) the line's `PoolSizes` field / "ready"
    reader: str  # who reads it, for what
    surface: str | None = None
    only: str | None = None
    at_ready: bool = True


_EFFECTIVE = "harness/trial.py effective_params (effective.*)"
NEEDS: tuple[Need, ...] = (
    Need(SERVER_INFO, "version", "harness/measure/surface_check.py (which release answered)"),
    Need(SERVER_INFO, "speculative_algorithm", _EFFECTIVE),
    Need(SERVER_INFO, "speculative_num_steps", _EFFECTIVE, only="speculative"),
    Need(SERVER_INFO, "speculative_eagle_topk", _EFFECTIVE, only="speculative"),
    Need(SERVER_INFO, "speculative_num_draft_tokens", _EFFECTIVE, only="speculative"),
    Need(SERVER_INFO, "mem_fraction_static", _EFFECTIVE),
    Need(SERVER_INFO, "max_running_requests", _EFFECTIVE + " and the memory verdict's cap"),
    Need(SERVER_INFO, "max_total_num_tokens", _EFFECTIVE + " and the KV pool (measure/memory.py)"),
    Need(SERVER_INFO, "tp_size", _EFFECTIVE),
    Need(SERVER_INFO, "disable_overlap_schedule", _EFFECTIVE),
    # 0.5.1.post3 keeps it None (its workers choose and log it: harness.sglang.attention)
    Need(SERVER_INFO, "attention_backend", _EFFECTIVE + " (else the log's default line)"),
    Need(SERVER_INFO, "enable_hierarchical_cache", _EFFECTIVE + " (hicache_size 0 when off)"),
    Need(SERVER_INFO, "hicache_size", _EFFECTIVE, only="hicache"),
    Need(SERVER_INFO, "cuda_graph_config", _EFFECTIVE + " (decode.max_bs)", surface="current"),
    Need(SERVER_INFO, "cuda_graph_max_bs", _EFFECTIVE, surface="legacy"),
    Need(SERVER_INFO, "internal_states", "measure/acceptance.py (avg_spec_accept_length)"),
    Need(METRICS, "sglang:generation_tokens_total", "measure/acceptance.py (counter deltas)"),
    Need(METRICS, "sglang:prompt_tokens_total", "measure/memory_probe.py (prefix hit share)"),
    Need(
        METRICS,
        "sglang:num_requests_total",
        "measure/acceptance.py (first tokens per request)",
        at_ready=False,  # labelled by is_streaming: a series from the first finished request on
    ),
    Need(METRICS, "sglang:max_total_num_tokens", "measure/memory.py (KV pool)", surface="current"),
    Need(
        METRICS,
        "sglang:spec_verify_calls_total",
        "measure/acceptance.py (accept length from counters)",
        only="speculative",
        at_ready=False,  # 0.5.23 increments it only when a request had verify steps
    ),
    Need(
        METRICS,
        "sglang:num_retracted_requests_total",
        "measure/memory_probe.py (retractions)",
        surface="current",
        at_ready=False,  # labelled: no sample before the first retraction
    ),
    Need(
        METRICS,
        "sglang:total_retracted_reqs",
        "measure/memory_probe.py (retractions)",
        surface="legacy",
        at_ready=False,
    ),
    Need(
        METRICS,
        "sglang:cached_tokens_total",
        "measure/memory_probe.py (prefix hits)",
        at_ready=False,  # 0.5.23: a cache source's sample appears with its first hit
    ),
    Need(
        METRICS,
        "sglang:hicache_host_total_tokens",
        "measure/memory.py (host pool)",
        surface="current",
        only="hicache",
        at_ready=False,
    ),
    Need(LOG, "ready", "server/process.py wait_ready (the ready line)"),
    Need(LOG, "max_total_num_tokens", "server/logs.py parse_pool_sizes (max_total_num_tokens=N)"),
    Need(LOG, "device_tokens", "server/logs.py parse_pool_sizes (KV Cache is allocated)"),
    Need(LOG, "host_gb", "server/logs.py parse_pool_sizes (the host pool line)", only="hicache"),
    Need(LOG, "decode", "server/logs.py parse_decode_line (Decode batch)", at_ready=False),
)

_LOG_LINES = {
    "ready": f"ready line ({READY_LINE!r})",
    "max_total_num_tokens": "'max_total_num_tokens=N' start-up line",
    "device_tokens": "'KV Cache is allocated. ... #tokens: N' line",
    "host_gb": "HiCache host pool line",
    "decode": "'Decode batch' line",
}


def needed_at_ready(version: str, *, speculative: bool, hicache: bool, metrics: bool) -> list[Need]:
    """The needs a ready server of the `version` surface (CURRENT or LEGACY) must meet."""
    which = "legacy" if surface(version).legacy else "current"
    wanted = {None, *(["speculative"] if speculative else []), *(["hicache"] if hicache else [])}
    return [
        n
        for n in NEEDS
        if n.at_ready
        and n.surface in (None, which)
        and n.only in wanted
        and (metrics or n.where != METRICS)
    ]


def surface_mismatches(
    needs: list[Need], info: dict[str, Any], metric_names: set[str] | None, log_text: str
) -> list[str]:
    """Each need the server does not meet, named with its reader. `metric_names` None: /metrics
    did not answer (named once, not per metric)."""
    release = info.get("version")
    who = f"SGLang {release}" if release else "the server"
    out = []
    sizes = parse_pool_sizes(log_text)
    ready = any(is_ready_line(line) for line in log_text.splitlines())
    for need in needs:
        if need.where == SERVER_INFO and need.name not in info:
            out.append(f"{SERVER_INFO} of {who} has no {need.name!r} field (read by {need.reader})")
        elif need.where == METRICS and metric_names is not None and need.name not in metric_names:
            out.append(f"{METRICS} of {who} has no {need.name} (read by {need.reader})")
        elif need.where == LOG:
            found = ready if need.name == "ready" else getattr(sizes, need.name) is not None
            if not found:
                out.append(f"{LOG} of {who} has no {_LOG_LINES[need.name]} (read by {need.reader})")
    if metric_names is None and any(n.where == METRICS for n in needs):
        out.append(f"{METRICS} of {who} did not answer (the counters are read there)")
    return out


def read_metric_names(base_url: str, headers: dict[str, str]) -> set[str] | None:
    """The `sglang:` names /metrics exports now; None when it does not answer 200."""
    try:
        with httpx.Client(
            base_url=base_url, timeout=30.0, headers=headers, verify=tls_context()
        ) as client:
            response = client.get("/metrics")
    except httpx.HTTPError:
        return None
    return set(prometheus_values(response.text)) if response.status_code == 200 else None


_LOGGED: set[tuple[str, ...]] = set()


def report(mismatches: list[str], release: str | None) -> None:
    """Log the mismatches once per process for each distinct set (every trial records them)."""
    key = (str(release), *mismatches)
    if not mismatches or key in _LOGGED:
        return
    _LOGGED.add(key)
    read = ", ".join(RELEASES_READ)
    verdict = "is not a release specsweep has read" if not release_read(release) else "is read"
    log.warning(
        "SGLang %s %s (%s), and its server lacks what specsweep parses:\n  %s",
        release, verdict, read, "\n  ".join(mismatches),
    )  # fmt: skip
