from __future__ import annotations

import pytest

from harness.record.results import Outcome
from harness.server import logs
from harness.server.logs import classify_exit, excerpt, is_ready_line, parse_decode_line

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
    from harness.server.logs import oom_kind

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


# -- how a server died, with SGLang's own texts (docs/reliability.md cites file and version) ----
TORCH_NOTE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)
# 0.5.23 model_executor/runner_backend_utils/__init__.py: CUDA_GRAPH_CAPTURE_FAILED_MSG
CAPTURE_HINT = (
    "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def capture_failure(cause: str) -> str:
    """0.5.23 decode_cuda_graph_runner.py: `raise Exception(f"Capture cuda graph failed: {e}\\n
    {CUDA_GRAPH_CAPTURE_FAILED_MSG}")` for any RuntimeError, in the scheduler's traceback."""
    return (
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f"{cause}\n\nDuring handling of the above exception, another exception occurred:\n\n"
        f"Exception: Capture cuda graph failed: {cause.split(': ', 1)[1]}\n{CAPTURE_HINT}"
        "[2026-01-01 12:00:00] Received sigquit from a child process. It usually means the child "
        "failed.\n"
    )


def test_a_capture_failure_from_an_illegal_memory_access_is_a_crash():
    text = capture_failure(
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        + TORCH_NOTE
    )
    assert classify_exit(text, -9) is Outcome.CRASH
    assert logs.oom_kind(text) is None
    assert logs.is_fatal_line(text.splitlines()[0])
    assert logs.is_fatal_line("Exception: Capture cuda graph failed: CUDA error: an illegal memory")
    # 0.5.23's prefill runner words its wrapper differently (prefill_cuda_graph_runner.py)
    assert logs.is_fatal_line("RuntimeError: Capture prefill CUDA graph failed: Triton Error")


@pytest.mark.parametrize(
    "cause",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 139.72 GiB of which 1.06 GiB is free.",
        f"torch.AcceleratorError: CUDA error: out of memory\n{TORCH_NOTE}",
        "RuntimeError: Triton Error [CUDA]: out of memory",
    ],
)
def test_a_capture_failure_from_out_of_memory_is_a_gpu_oom(cause):
    text = capture_failure(cause)
    assert classify_exit(text, -9) is Outcome.OOM and logs.oom_kind(text) == "gpu"


# 0.5.23 mem_cache/allocation.py (0.5.1.post3 managers/schedule_batch.py says the same): the KV
# allocator found no slot even after evicting the radix cache.
KV_EXHAUSTED = [
    "Decode out of memory. Try to lower your batch size.\nTry to allocate 48 tokens.\n"
    "Available tokens: 7 (available_size=7 + evictable_size=0)\n",
    "Prefill out of memory. Try to lower your batch size.\nTry to allocate 8192 tokens.\n"
    "Available tokens: 5120 (available_size=5120 + evictable_size=0)\n",
]


@pytest.mark.parametrize("text", KV_EXHAUSTED)
def test_kv_pool_exhaustion_at_run_time_is_a_kv_pool_oom(text):
    log = (
        f"[2026-01-01 12:00:00 TP0] {text}"
        "[2026-01-01 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f"RuntimeError: {text}"
        "[2026-01-01 12:00:00] SIGQUIT received. signum=None, frame=None. It usually means one "
        "child failed.\n"
    )
    assert logs.is_fatal_line(log.splitlines()[0])
    assert classify_exit(log, -9) is Outcome.OOM and logs.oom_kind(log) == "kv_pool"


# 0.5.23 texts of hybrid-pool (mamba / linear attention, SWA, unified pool) models that ran short.
HYBRID_TOO_SMALL = [
    # mem_cache/kv_cache_configurator.py
    "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
    "max_mamba_cache_size=0 (total_rest_memory=0.41 GB, mamba_cache_per_req=48.00 MB). Try: (1) "
    "reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
    "--speculative-num-draft-tokens, or (4) use GPUs with more memory.",
    "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
    "max_mamba_cache_size=2, mamba_ratio=3, resulting max_num_reqs=0. Try: (1) reduce "
    "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.",
    # model_executor/pool_configurator.py (SWA, then DSV4)
    "RuntimeError: SWA pool cap (65536 tokens, 3.00 GiB) leaves no room for the full KV pool "
    "within the available 2.50 GiB. Reduce --max-running-requests, lower "
    "SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static.",
    "RuntimeError: The DSV4 SWA pool cap (65536 tokens, 3.00 GB) leaves no room for the full KV "
    "pool within the available 2.50 GB. Reduce --max-running-requests, lower --swa-prefix-tails "
    "or SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static.",
    # mem_cache/unified_memory_pool.py
    "RuntimeError: [unified-memory-pool] hybrid_linear: byte budget 1048576 cannot fit ONE "
    "worst-case request (bs=1 floor 2097152 = kv=1048576 + mamba=1048576). A pool this size "
    "retract-livelocks at runtime. Raise --mem-fraction-static, lower the model context length, "
    "or reduce reserved memory.",
]


@pytest.mark.parametrize("text", HYBRID_TOO_SMALL)
def test_hybrid_pools_that_do_not_fit_are_kv_pool_ooms(text):
    assert classify_exit(f"line\n{text}\n", -9) is Outcome.OOM and logs.oom_kind(text) == "kv_pool"


def test_an_int8_mamba_checkpoint_pool_beside_the_static_pool_is_a_gpu_oom():
    # mem_cache/mamba_checkpoint_pool.py: allocated from the headroom outside the fraction
    text = (
        "RuntimeError: int8 mamba checkpoint pool needs ~6.10GB but only 2.00GB HBM is free. "
        "Lower --int8-mamba-ckpt-size (currently 512) or --mem-fraction-static."
    )
    assert classify_exit(text, -9) is Outcome.OOM and logs.oom_kind(text) == "gpu"


def watchdog(exitcode: int) -> str:
    """0.5.23 utils/watchdog.py SubprocessWatchdog, then tokenizer_manager.py's running-phase
    SIGQUIT handler (added with loop.add_signal_handler: called without arguments)."""
    return (
        f"[2026-01-01 12:00:00] Subprocess scheduler_0 (pid=4242) crashed with exit code "
        f"{exitcode}. Triggering SIGQUIT for cleanup...\n"
        "[2026-01-01 12:00:00] SIGQUIT received. signum=None, frame=None. It usually means one "
        "child failed.\n"
    )


def test_a_scheduler_the_oom_killer_took_after_start_up_is_a_host_oom():
    text = watchdog(-9)
    assert logs.is_fatal_line(text.splitlines()[0])
    assert classify_exit(text, -9) is Outcome.OOM and logs.oom_kind(text) == "host"


@pytest.mark.parametrize("exitcode", [-6, -11, 1])  # std::terminate (NCCL timeout), segfault
def test_a_scheduler_dead_of_another_signal_is_a_crash(exitcode):
    text = watchdog(exitcode)
    assert logs.is_fatal_line(text.splitlines()[0])
    assert classify_exit(text, -9) is Outcome.CRASH and logs.oom_kind(text) is None


def test_request_slots_running_out_is_a_crash_not_a_memory_failure():
    # mem_cache/allocation.py: the pool has --max-running-requests slots; SGLang calls running
    # out an admission bug ("the admission budget (PrefillAdder) was wrong"), not memory.
    text = (
        "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
        "`--max-running-requests`. req_to_token_pool.available_size()=0, num_reqs=3, "
    )
    assert classify_exit(text, -9) is Outcome.CRASH


# What a CPU without SGLang's CPU kernels prints when a speculative server starts (real SGLang
# 0.5.23 on a 2-core CPU, docs/real-sglang.md), and lines that must not count.
_NO_SPEC = [
    "ValueError: EAGLE is not supported in decode attention backend torch_native",
    "AttributeError: '_OpNamespace' 'sgl_kernel' object has no attribute 'decode_attention_cpu'",
    "specsweep_standin.StandInCalled: sgl_kernel.copy_all_layer_kv_cache_cpu was called, but ...",
]


@pytest.mark.parametrize("line", _NO_SPEC)
def test_a_speculative_launch_the_engine_cannot_run_names_its_cause(line):
    text = f"[2026-12-06 01:48:04] Scheduler hit an exception: Traceback ...\n{line}\n"
    cause, shown = logs.crash_cause(text, speculative=True)
    assert cause == logs.NO_SPECULATION and shown in line and len(shown) > 40
    assert logs.crash_cause(text, speculative=False) is None  # a plain server's crash is its own


def test_sglangs_model_registry_skipping_other_models_is_no_cause():
    text = (
        "Ignore import error when loading sglang.srt.models.grok: '_OpNamespace' 'sgl_kernel' "
        "object has no attribute 'fused_moe_router_cpu'\nRuntimeError: something else\n"
    )
    assert logs.crash_cause(text, speculative=True) is None
