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
