"""SGLang's start-up as it prints it: which phase a launch is in, and how long each phase took.

The output is read in pieces split on `\\r` and `\\n` (`split_output`): tqdm redraws its bars with a
carriage return and no newline, so a reader split on newlines only sees a bar when it ends.
`StartupTracker.feed` takes each piece and moves through the phases SGLang 0.5.23 prints
(0.5.1.post3's forms too):

- weights: `Load weight begin. avail mem=X GB` (`model_executor/model_runner.py::load_model`),
  the tqdm bar `Loading safetensors checkpoint shards:  NN% Completed | k/n [...]`
  (`model_loader/weight_utils.py::safetensors_weights_iterator`, `utils/common.py::BAR_FORMAT`;
  the pt, np_cache and multi-thread loaders' bars read the same), `Load weight end. ...` (a draft
  model prints its own begin/end pair);
- KV pool: `KV Cache is allocated. ...` (`mem_cache/memory_pool.py`), `Memory pool end. avail
  mem=X GB` (`mem_cache/kv_cache_configurator.py`);
- each graph capture: `Capture {target|draft} {prefill|decode|verify} CUDA graph begin. ...`
  (`model_runner_components/cuda_graph_setup.py`), `Capture draft decode|extend CUDA graph
  begin. ...` (`speculative/eagle_worker_v2.py`), 0.5.1's `Capture cuda graph begin. ...`; its
  tqdm bar `Capturing batches (bs=N avail_mem=X GB):  NN%|...| k/n [...]`
  (`runner/decode_cuda_graph_runner.py`); the matching `... end. ...` line;
- warm-up: `Engine startup timings (s): load_weight=..., ...` (`entrypoints/engine.py::
  _set_startup_time`, 0.5.23), after which the HTTP server starts and sends its warm-up request;
- ready: `The server is fired up and ready to roll!` (`entrypoints/http_server.py`).

`startup_phases` reads the per-phase durations SGLang measured itself: `/server_info`'s
`startup_time` (0.5.23 `TokenizerManager.startup_time`: `load_weight`, `kv_cache_allocation`,
`scheduler_e2e`, `tokenizer_e2e` and `cuda_graph` by phase), the values that
`observability/metrics_collector.py::emit_startup_time` exports as
`sglang:startup_time_seconds{phase=...}` and `sglang:startup_cuda_graph_time_seconds{phase=...}`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.sglang.surfaces import READY_LINE

LAUNCHING = "launching"
WEIGHTS = "loading weights"
KV_POOL = "allocating the KV pool"
WARMUP = "warm-up"
READY = "ready"

_LOAD_BEGIN = re.compile(r"Load weight begin\b")
_LOAD_END = re.compile(r"Load weight end\b")
_SHARDS = re.compile(
    r"Loading (?:safetensors|pt|np_cache) checkpoint shards: *(?P<pct>\d+)% Completed \| "
    r"(?P<k>\d+)/(?P<n>\d+)"
)
_KV = re.compile(r"(?:KV Cache is allocated|Memory pool end)\b")
_CAPTURE = re.compile(
    r"Capture (?:(?P<name>[a-z][a-z ]*?) )?(?:cuda|CUDA|CPU|NPU|XPU|\w+) graph "
    r"(?P<edge>begin|end)\."
)
_CAPTURING = re.compile(
    r"Capturing batches \(bs=(?P<bs>\d+)[^)]*\): *(?P<pct>\d+)%\|.*?\| (?P<k>\d+)/(?P<n>\d+)"
)
_TIMINGS = re.compile(r"Engine startup timings \(s\):")


def split_output(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete pieces of `buffer` (each with its `\\r` or `\\n`), and the unterminated rest."""
    pieces, start = [], 0
    for match in re.finditer(rb"\r\n|\r|\n", buffer):
        pieces.append(buffer[start : match.end()])
        start = match.end()
    return pieces, buffer[start:]


@dataclass
class PhaseMark:
    phase: str  # e.g. "loading weights", "capturing target verify CUDA graph"
    at_s: float  # seconds from launch when it began


@dataclass
class StartupTracker:
    """The start-up phase of one launch, from its output; monotonic seconds from `started`."""

    started: float = field(default_factory=time.monotonic)
    clock: Callable[[], float] = time.monotonic
    phase: str = LAUNCHING
    progress: str = ""  # within the phase: "40% (26/64 shards)"
    marks: list[PhaseMark] = field(default_factory=list)
    last_output: float = 0.0  # monotonic time of the last output, any output
    changes: int = 0  # bumped whenever the phase or its progress moves (for a display)
    _weights_seen: int = 0

    def __post_init__(self) -> None:
        self.last_output = self.started
        self.marks.append(PhaseMark(LAUNCHING, 0.0))

    def output(self) -> None:
        """Something arrived (even a piece that moves no phase): the server is not silent."""
        self.last_output = self.clock()

    def silent_s(self) -> float:
        return self.clock() - self.last_output

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def describe(self) -> str:
        return f"{self.phase} {self.progress}".strip()

    def _enter(self, phase: str) -> bool:
        self.progress = ""
        if phase == self.phase:
            return False
        self.phase = phase
        self.marks.append(PhaseMark(phase, round(self.clock() - self.started, 3)))
        return True

    def feed(self, text: str) -> bool:
        """Read one piece of output; True when it began a new phase (or moved a bar)."""
        moved = self._read(text)
        if moved:
            self.changes += 1
        return moved

    def _read(self, text: str) -> bool:
        if READY_LINE in text:
            return self._enter(READY)
        if _LOAD_BEGIN.search(text):
            self._weights_seen += 1
            return self._enter(WEIGHTS if self._weights_seen == 1 else "loading draft weights")
        if bar := _SHARDS.search(text):
            if "weights" not in self.phase:  # a bar without its begin line (an older form)
                self._enter(WEIGHTS)
            return self._progress(f"{bar['pct']}% ({bar['k']}/{bar['n']} shards)")
        if _LOAD_END.search(text):
            self.progress = "done"
            return False
        if _KV.search(text):
            return self._enter(KV_POOL)
        if capture := _CAPTURE.search(text):
            name = capture["name"] or ""
            if capture["edge"] == "begin":
                label = f"{name} CUDA graph" if name else "CUDA graph"
                return self._enter(f"capturing {label}")
            self.progress = "done"
            return False
        if bar := _CAPTURING.search(text):
            if not self.phase.startswith("capturing"):
                self._enter("capturing CUDA graph")
            return self._progress(f"{bar['pct']}% ({bar['k']}/{bar['n']} batch sizes)")
        if _TIMINGS.search(text):
            return self._enter(WARMUP)
        return False

    def _progress(self, progress: str) -> bool:
        changed = progress != self.progress
        self.progress = progress
        return changed


# A log level above INFO hides every start-up line but tqdm's bars: a silent start is then no sign
# of a hang (0.5.23 `utils/common.py::configure_logger` sets the root level to --log-level).
_QUIET_LEVELS = {"warning", "error", "critical"}


def hides_startup_lines(argv: tuple[str, ...] | list[str]) -> bool:
    """Does this command's `--log-level` hide SGLang's INFO start-up lines?"""
    args = list(argv)
    for i, arg in enumerate(args):
        value = None
        if arg == "--log-level" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--log-level="):
            value = arg.partition("=")[2]
        if value is not None and value.lower() in _QUIET_LEVELS:
            return True
    return False


def startup_phases(info: dict[str, Any]) -> dict[str, float]:
    """The server's own start-up durations by phase (seconds, the server's clock), as metric
    names: `startup_load_weight_s`, ..., `startup_cuda_graph_<phase>_s` (captures that ran).
    {} when the server does not report them (0.5.1)."""
    startup = info.get("startup_time")
    if not isinstance(startup, dict):
        return {}
    phases: dict[str, float] = {}
    for key in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"):
        value = startup.get(key)
        if isinstance(value, int | float):
            phases[f"startup_{key}_s"] = round(float(value), 3)
    graphs = startup.get("cuda_graph")
    if isinstance(graphs, dict):
        for key, value in graphs.items():
            if isinstance(value, int | float) and value > 0:
                phases[f"startup_cuda_graph_{key}_s"] = round(float(value), 3)
    return phases
