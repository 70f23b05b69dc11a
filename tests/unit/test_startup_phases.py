"""Reading SGLang's start-up from its output: pieces split on \\r and \\n (tqdm redraws), the phase
each moves to, and the durations the server reports. The lines are 0.5.23's, as its source prints
them (model_runner.py, weight_utils.py with utils/common.py BAR_FORMAT, memory_pool.py,
kv_cache_configurator.py, cuda_graph_setup.py, decode_cuda_graph_runner.py, eagle_worker_v2.py,
engine.py, http_server.py); the 0.5.1 capture lines are the simulator's legacy form."""

from __future__ import annotations

from harness.server.logs import excerpt
from harness.server.startup import (
    KV_POOL,
    LAUNCHING,
    READY,
    WARMUP,
    WEIGHTS,
    StartupTracker,
    hides_startup_lines,
    split_output,
    startup_phases,
)

TS = "[2026-05-01 10:00:00] "
BAR = (
    "Loading safetensors checkpoint shards: {pct:3d}% Completed | {k}/64 "
    "[00:{s:02d}<01:00, 1.05it/s]"
)
CAPTURE_BAR = (
    "Capturing batches (bs={bs} avail_mem=14.53 GB): {pct:3d}%|██        | {k}/8 "
    "[00:03<00:11, 1.96s/it]"
)
LINES = [
    "Load weight begin. avail mem=95.59 GB",
    "".join("\r" + BAR.format(pct=round(100 * k / 64), k=k, s=k % 60) for k in (0, 1, 2, 26))
    + "\r"
    + BAR.format(pct=100, k=64, s=59),
    "Load weight end. elapsed=63.00 s, type=KimiK25ForConditionalGeneration, "
    "avail mem=22.07 GB, mem usage=73.53 GB.",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 113295, K size: 3.77 GB, "
    "V size: 3.77 GB",
    "Memory pool end. avail mem=14.53 GB",
    "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, "
    "avail mem=14.53 GB",
    "\r"
    + CAPTURE_BAR.format(bs=48, pct=0, k=0)
    + "\r"
    + CAPTURE_BAR.format(bs=32, pct=12, k=1)
    + "\r"
    + CAPTURE_BAR.format(bs=1, pct=100, k=8),
    "Capture target verify CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32, 48], "
    "elapsed=15.66 s, mem usage=0.42 GB, avail mem=14.11 GB.",
    "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
    "bs=[1, 2], avail mem=14.11 GB",
    "Capture draft decode CUDA graph end. elapsed=6.52 s, mem usage=0.18 GB, avail mem=13.93 GB.",
    "Engine startup timings (s): load_weight=63.00, kv_cache_allocation=0.90, "
    "scheduler_e2e=89.99, cuda_graph={prefill=0.00, decode=0.00, target_verify=15.66, "
    "draft_prefill=0.00, draft_decode=6.52, draft_extend=3.91}, tokenizer_e2e=91.20",
    "The server is fired up and ready to roll!",
]
# Log lines carry the timestamp; tqdm's bars (stderr) do not.
OUTPUT = "".join(ln + "\n" if ln.startswith("\r") else TS + ln + "\n" for ln in LINES)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_output_splits_on_carriage_returns_as_well_as_newlines():
    pieces, rest = split_output(b"a\rb\r\nc\nd\re")
    assert pieces == [b"a\r", b"b\r\n", b"c\n", b"d\r"]
    assert rest == b"e"  # a bar being drawn: tqdm's next "\r" ends it


def test_phases_follow_sglangs_lines_through_the_redraws():
    clock = Clock()
    tracker = StartupTracker(started=clock.now, clock=clock)
    seen = []
    pieces, rest = split_output(OUTPUT.encode())
    assert rest == b""
    for piece in pieces:
        clock.now += 1.0
        tracker.feed(piece.decode())
        seen.append(tracker.describe())
    phases = [m.phase for m in tracker.marks]
    assert phases == [
        LAUNCHING,
        WEIGHTS,
        KV_POOL,
        "capturing target verify CUDA graph",
        "capturing draft decode CUDA graph",
        WARMUP,
        READY,
    ]
    assert "loading weights 41% (26/64 shards)" in seen  # the bar's redraws, each one read
    assert "capturing target verify CUDA graph 12% (1/8 batch sizes)" in seen
    assert all(b.at_s > a.at_s for a, b in zip(tracker.marks, tracker.marks[1:], strict=False))


def test_an_unterminated_redraw_moves_the_progress():
    tracker = StartupTracker()
    tracker.feed(TS + "Load weight begin. avail mem=95.59 GB\n")
    changes = tracker.changes
    tracker.feed("\r" + BAR.format(pct=41, k=26, s=25))  # no "\r" after it yet
    assert tracker.describe() == "loading weights 41% (26/64 shards)"
    assert tracker.changes == changes + 1
    tracker.feed("\r" + BAR.format(pct=41, k=26, s=25))  # the same drawing read again: no move
    assert tracker.changes == changes + 1


def test_a_draft_model_load_and_the_legacy_capture_lines_are_phases_too():
    tracker = StartupTracker()
    for line in (
        "Load weight begin. avail mem=90.00 GB",
        "Load weight end. type=DeepseekV3ForCausalLM, avail mem=20.00 GB, mem usage=70.00 GB.",
        "Load weight begin. avail mem=20.00 GB",
        "Capture cuda graph begin. This can take up to several minutes.",
        "Capturing batches (bs=48 avail_mem=14.53 GB):  50%|█████     | 4/8 [00:03<00:03, 1.2it/s]",
    ):
        tracker.feed(TS + line)
    assert [m.phase for m in tracker.marks][1:] == [
        WEIGHTS,
        "loading draft weights",
        "capturing CUDA graph",
    ]
    assert tracker.progress == "50% (4/8 batch sizes)"


def test_silence_is_measured_from_the_last_output_of_any_kind():
    clock = Clock()
    tracker = StartupTracker(started=clock.now, clock=clock)
    clock.now += 30
    assert tracker.silent_s() == 30
    tracker.output()  # a piece no pattern knows still proves the server is alive
    clock.now += 5
    assert tracker.silent_s() == 5 and tracker.elapsed_s() == 35


def test_a_quiet_log_level_turns_the_stall_check_off():
    assert hides_startup_lines(["python", "-m", "sglang.launch_server", "--log-level", "warning"])
    assert hides_startup_lines(["--log-level=ERROR"])
    assert not hides_startup_lines(["--log-level", "info"])
    assert not hides_startup_lines(["--log-level-http", "warning"])


def test_the_servers_own_durations_become_metrics():
    info = {
        "startup_time": {
            "load_weight": 63.0,
            "kv_cache_allocation": 0.9,
            "scheduler_e2e": 89.99,
            "tokenizer_e2e": 91.2,
            "cuda_graph": {"prefill": 0.0, "target_verify": 15.66, "draft_decode": 6.52},
        }
    }
    assert startup_phases(info) == {
        "startup_load_weight_s": 63.0,
        "startup_kv_cache_allocation_s": 0.9,
        "startup_scheduler_e2e_s": 89.99,
        "startup_tokenizer_e2e_s": 91.2,
        "startup_cuda_graph_target_verify_s": 15.66,
        "startup_cuda_graph_draft_decode_s": 6.52,
    }
    assert startup_phases({"startup_time": 1714557600.0}) == {}  # not a dict: nothing
    assert startup_phases({}) == {}


def test_an_excerpt_shows_a_bar_as_a_terminal_does():
    text = "start\n" + "".join("\r" + BAR.format(pct=p, k=p, s=1) for p in (1, 2, 3)) + "\n"
    assert excerpt(text).splitlines() == ["start", BAR.format(pct=3, k=3, s=1)]
