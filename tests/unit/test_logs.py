from __future__ import annotations

import pytest

from harness.logs import classify_exit, excerpt, is_ready_line, parse_decode_line
from harness.results import Outcome

V0523_SPEC = (
    "[2026-01-01 12:00:00 TP0] Decode batch, #running-req: 8, #token: 4321, token usage: 0.02, "
    "accept len: 3.12, accept rate: 0.71, cuda graph: True, gen throughput (token/s): 1650.10, "
    "#queue-req: 0"
)
V0523_PLAIN = (
    "[2026-01-01 12:00:00 TP0] Decode batch, #running-req: 8, #token: 4321, token usage: 0.02, "
    "cuda graph: True, gen throughput (token/s): 812.34, #queue-req: 0"
)
V051_SPEC = (
    "[2025-08-01 12:00:00 TP0] Decode batch. #running-req: 1, #token: 900, token usage: 0.01, "
    "accept len: 2.27, cuda graph: True, gen throughput (token/s): 81.70, #queue-req: 0, "
)


def test_parses_0523_speculative_line():
    stats = parse_decode_line(V0523_SPEC)
    assert stats is not None
    assert (stats.running_req, stats.tokens, stats.accept_len, stats.accept_rate) == (
        8,
        4321,
        3.12,
        0.71,
    )
    assert stats.cuda_graph is True and stats.gen_throughput == 1650.10 and stats.queue_req == 0
    assert stats.timestamp == "2026-01-01 12:00:00"


def test_parses_0523_plain_line_without_accept_len():
    stats = parse_decode_line(V0523_PLAIN)
    assert stats is not None and stats.accept_len is None and stats.gen_throughput == 812.34


def test_parses_051_line_with_period_and_trailing_comma():
    stats = parse_decode_line(V051_SPEC)
    assert stats is not None and stats.accept_len == 2.27 and stats.accept_rate is None


def test_other_lines_are_not_decode_lines():
    assert parse_decode_line("[x] Prefill batch, #new-seq: 1, #new-token: 13") is None


def test_ready_line():
    assert is_ready_line("[2026-01-01 12:00:00] The server is fired up and ready to roll!")
    assert not is_ready_line("[2026-01-01 12:00:00] Uvicorn running on http://127.0.0.1:30000")


@pytest.mark.parametrize(
    "text",
    [
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 20.00 MiB",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit",
    ],
)
def test_oom_texts_classify_as_oom(text):
    assert classify_exit(f"line\n{text}\nmore", -9) is Outcome.OOM


def test_other_failures_classify_as_crash():
    assert classify_exit("AssertionError\n", 1) is Outcome.CRASH


def test_excerpt_keeps_the_oom_line_even_when_it_scrolled_away():
    log = "CUDA out of memory\n" + "\n".join(f"line {i}" for i in range(100))
    text = excerpt(log, lines=5)
    assert text.splitlines()[0] == "CUDA out of memory"
    assert text.splitlines()[-1] == "line 99"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "kv_pool",
        ),
        ("Exception: Capture cuda graph failed: CUDA out of memory.", "gpu"),
        ("RuntimeError: Rank 0 scheduler died during initialization (exit code: -9).", "host"),
        # 0.5.1.post3 says it in two lines
        (
            "[t] Rank 0 scheduler is dead. Please check if there are relevant logs.\n"
            "[t] Exit code: -9",
            "host",
        ),
    ],
)
def test_oom_kind_in_both_versions(text, kind):
    from harness.logs import oom_kind

    assert oom_kind(text) == kind
    assert classify_exit(text, -9) is Outcome.OOM


def test_a_dead_scheduler_with_another_exit_code_is_a_crash():
    text = "Rank 0 scheduler is dead. Please check if there are relevant logs.\nExit code: 1"
    assert classify_exit(text, 1) is Outcome.CRASH


# Lines built from the format strings of SGLang 0.5.23 `managers/scheduler_components/
# metrics_reporter.py::report_decode_stats` and `pool_stats_observer.py::
# get_decode_usage_msg_parts` (and 0.5.1.post3 `scheduler_metrics_mixin.py` for the hybrid one).
_TS = "[2026-01-01 12:00:00 TP0] "
_TAIL = "gen throughput (token/s): 812.34, #queue-req: 3"
DECODE_FORMS = [
    # SGLANG_LOG_FORWARD_ITERS=1: f"Decode batch{iter_msg}," with iter_msg = f" [{batch_iter}]"
    (
        "forward iters",
        f"{_TS}Decode batch [1234], #running-req: 8, #token: 4321, token usage: 0.02, "
        f"accept len: 3.12, accept rate: 0.71, cuda graph: True, {_TAIL}",
        dict(forward_iter=1234, tokens=4321, accept_len=3.12, cuda_graph=True),
    ),
    # is_hybrid_swa: "#full token", "full token usage", "#swa token", "swa token usage"
    (
        "hybrid swa",
        f"{_TS}Decode batch, #running-req: 4, #full token: 1000, full token usage: 0.10, "
        f"#swa token: 3000, swa token usage: 0.30, cuda graph: True, {_TAIL}",
        dict(tokens=3000, token_usage=0.30, swa_tokens=3000, swa_token_usage=0.30),
    ),
    # is_hybrid_ssm without swa: "#full token", "full token usage", "mamba num", "mamba usage"
    (
        "hybrid ssm",
        f"{_TS}Decode batch, #running-req: 4, #full token: 1000, full token usage: 0.10, "
        f"mamba num: 4, mamba usage: 0.05, cuda graph: False, {_TAIL}",
        dict(tokens=1000, token_usage=0.10, mamba_usage=0.05, cuda_graph=False),
    ),
    # is_hisparse on a plain pool: only the gpu/cpu parts
    (
        "hisparse",
        f"{_TS}Decode batch, #running-req: 2, #gpu token: 500, gpu token usage: 0.05, "
        f"#cpu token: 9000, cpu token usage: 0.40, cuda graph: True, {_TAIL}",
        dict(tokens=500, token_usage=0.05),
    ),
    # _graph_backend_label by device: "cpu graph", "npu graph", "musa graph", else "cuda graph"
    (
        "cpu graph",
        f"{_TS}Decode batch, #running-req: 1, #token: 10, token usage: 0.00, cpu graph: False, "
        f"{_TAIL}",
        dict(graph_label="cpu graph", cuda_graph=False),
    ),
    (
        "npu graph",
        f"{_TS}Decode batch, #running-req: 1, #token: 10, token usage: 0.00, npu graph: True, "
        f"{_TAIL}",
        dict(graph_label="npu graph", cuda_graph=True),
    ),
    # DSpark / ragged verify parts and the --enable-mfu-metrics suffix
    (
        "cap len and mfu suffix",
        f"{_TS}Decode batch, #running-req: 8, #token: 4321, token usage: 0.02, accept len: 2.50, "
        "accept rate: 0.50, cap len: 3.00, block accept len: 2.00, cuda graph: True, "
        f"{_TAIL}, est. decode TFLOPS/s (per GPU): 1.20, est. read BW (GB/s per GPU): 900.00, "
        "est. write BW (GB/s per GPU): 10.00",
        dict(accept_len=2.50, accept_rate=0.50, queue_req=3, gen_throughput=812.34),
    ),
    # 0.5.1.post3 hybrid swa: "Decode batch." and a trailing ", "
    (
        "0.5.1 hybrid swa",
        "[2025-08-01 12:00:00 TP0] Decode batch. #running-req: 1, #full token: 900, "
        "full token usage: 0.01, #swa token: 300, swa token usage: 0.02, accept len: 2.27, "
        "cuda graph: True, gen throughput (token/s): 81.70, #queue-req: 0, ",
        dict(tokens=900, token_usage=0.02, accept_len=2.27, accept_rate=None, queue_req=0),
    ),
]


@pytest.mark.parametrize(
    ("line", "expected"), [f[1:] for f in DECODE_FORMS], ids=[f[0] for f in DECODE_FORMS]
)
def test_parses_every_decode_line_form_sglang_prints(line, expected):
    stats = parse_decode_line(line)
    assert stats is not None
    assert {k: getattr(stats, k) for k in expected} == expected
    assert stats.timestamp is not None and stats.gen_throughput > 0


def test_the_graph_label_defaults_to_cuda_and_no_iteration():
    stats = parse_decode_line(V0523_PLAIN)
    assert stats.graph_label == "cuda graph" and stats.forward_iter is None
