"""What the harness reads from a server (harness.measure.surface_check.NEEDS) is the whole list,
and a ready server is held to the part of it that exists at ready, each miss named."""

from __future__ import annotations

import re
from pathlib import Path

from harness.measure.surface_check import (
    LOG,
    METRICS,
    NEEDS,
    SERVER_INFO,
    needed_at_ready,
    surface_mismatches,
)
from harness.sglang.surfaces import CURRENT, LEGACY, READY_LINE
from harness.trial import EFFECTIVE_KEYS

ROOT = Path(__file__).resolve().parents[2]
LOG_TEXT = (
    "[t] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, KV size: 1.00 GB\n"
    "[t] max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=48, context_len=4096, available_gpu_mem=10.00 GB\n"
    f"[t] {READY_LINE}\n"
)


def _names(where: str) -> set[str]:
    return {n.name for n in NEEDS if n.where == where}


def test_every_sglang_metric_the_harness_reads_is_listed():
    """The readers' `sglang:` names, grepped from harness/measure and harness/server."""
    read = set()
    for folder in ("harness/measure", "harness/server"):
        for path in (ROOT / folder).glob("*.py"):
            if path.name != "surface_check.py":
                read |= set(re.findall(r'"(sglang:[a-z_]+)"', path.read_text()))
    assert read, "the grep found no metric names"
    assert read - _names(METRICS) == set()


def test_every_effective_arg_read_from_server_info_is_listed():
    # cuda_visible_devices is the harness's own; the decode graph batch is read from
    # cuda_graph_config (current) or cuda_graph_max_bs (legacy), both listed.
    fields = set(EFFECTIVE_KEYS) - {"cuda_visible_devices", "cuda_graph_max_bs_decode"}
    assert fields - _names(SERVER_INFO) == set()


def _current_info(**drop) -> dict:
    keys = [n.name for n in needed_at_ready(CURRENT, speculative=True, hicache=False, metrics=True)]
    info = {k: 1 for k in keys if not k.startswith("sglang:")} | {"version": "0.5.23"}
    return {k: v for k, v in info.items() if k not in drop}


METRICS_AT_READY = {
    "sglang:generation_tokens_total", "sglang:prompt_tokens_total", "sglang:max_total_num_tokens",
}  # fmt: skip


def test_a_server_with_everything_has_no_mismatch():
    needs = needed_at_ready(CURRENT, speculative=True, hicache=False, metrics=True)
    assert surface_mismatches(needs, _current_info(), METRICS_AT_READY, LOG_TEXT) == []


def test_each_missing_field_metric_and_line_is_named_with_its_reader():
    needs = needed_at_ready(CURRENT, speculative=True, hicache=False, metrics=True)
    info = _current_info(speculative_eagle_topk=True) | {"version": "0.5.24"}
    log_text = LOG_TEXT.replace("max_total_num_tokens=1000", "max_total_tokens=1000")
    metrics = METRICS_AT_READY - {"sglang:prompt_tokens_total"}
    got = surface_mismatches(needs, info, metrics, log_text)
    assert got == [
        "/server_info of SGLang 0.5.24 has no 'speculative_eagle_topk' field (read by "
        "harness/trial.py effective_params (effective.*))",
        "/metrics of SGLang 0.5.24 has no sglang:prompt_tokens_total (read by "
        "measure/memory_probe.py (prefix hit share))",
        "server.log of SGLang 0.5.24 has no 'max_total_num_tokens=N' start-up line (read by "
        "server/logs.py parse_pool_sizes (max_total_num_tokens=N))",
    ]


def test_metrics_that_do_not_answer_are_named_once():
    needs = needed_at_ready(CURRENT, speculative=False, hicache=False, metrics=True)
    got = surface_mismatches(needs, _current_info(), None, LOG_TEXT)
    assert got == ["/metrics of SGLang 0.5.23 did not answer (the counters are read there)"]


def test_what_is_needed_depends_on_the_surface_and_the_launch():
    def names(version, **kw):
        return {n.name for n in needed_at_ready(version, **kw)}

    plain = dict(speculative=False, hicache=False, metrics=True)
    assert "cuda_graph_config" in names(CURRENT, **plain)
    assert "cuda_graph_max_bs" not in names(CURRENT, **plain)
    assert "cuda_graph_max_bs" in names(LEGACY, **plain)
    assert "sglang:max_total_num_tokens" not in names(LEGACY, **plain)  # 0.5.1 has no such gauge
    assert "speculative_num_steps" not in names(CURRENT, **plain)
    assert "speculative_num_steps" in names(CURRENT, **{**plain, "speculative": True})
    assert "host_gb" in names(CURRENT, **{**plain, "hicache": True})
    no_metrics = names(CURRENT, **{**plain, "metrics": False})
    assert not any(n.startswith("sglang:") for n in no_metrics)
    # what appears only after a retraction, a hit, a verify step or a decode line: not at ready
    for later in ("sglang:num_retracted_requests_total", "sglang:cached_tokens_total", "decode"):
        assert later not in names(CURRENT, speculative=True, hicache=True, metrics=True)
    assert {n.where for n in NEEDS} == {SERVER_INFO, METRICS, LOG}


def test_a_log_without_the_ready_line_is_named():
    needs = needed_at_ready(LEGACY, speculative=False, hicache=False, metrics=False)
    info = {n.name: 1 for n in needs if n.where == SERVER_INFO}
    got = surface_mismatches(needs, info, set(), LOG_TEXT.replace(READY_LINE, "ready"))
    assert got == [
        f"server.log of SGLang 1 has no ready line ({READY_LINE!r}) (read by server/process.py "
        "wait_ready (the ready line))"
    ]
