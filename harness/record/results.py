"""Typed result records: the schema that trial folders, MLflow and analysis share.

`result.json` in every trial folder is `TrialResult.to_dict()`; `requests.jsonl` holds one
`RequestRecord` per line. Times in them are on the server's clock (see `harness.measure.clock`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


class Outcome(StrEnum):
    OK = "ok"
    OOM = "oom"  # GPU/host memory ran out (start-up or during the benchmark)
    CRASH = "crash"  # the server exited or stopped answering for another reason
    TIMEOUT = "timeout"  # the server never became ready before its deadline
    INVALID = "invalid"  # the configuration was refused before launch
    DUPLICATE = "duplicate"  # the same effective configuration was already measured
    PREDICTED_OOM = "predicted_oom"  # needs at least the memory of a trial that ran out of it
    KNOWN_CRASH = "known_crash"  # crashed (or timed out) the same way twice: not launched
    DOMINATED = "dominated"  # SGLang verifies the same tree as a smaller launch: not launched
    PRUNED = "pruned"  # stopped early: its upper bound fell below the best trial's lower bound
    ERROR = "error"  # the harness itself failed (a bug or an unreachable service), not the server
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C / SIGTERM) during the trial


@dataclass
class RequestRecord:
    phase: str  # "warmup" or "measure"
    run: int
    concurrency: int
    prompt_id: str
    start_s: float  # server clock, relative to the start of the run
    first_token_s: float | None
    end_s: float | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    reasoning_ended: bool | None = None  # False: cut off while still thinking
    verify_ct: int | None = None  # verify steps, when the server reports them
    accepted_tokens: int | None = None  # accepted draft tokens, when the server reports them
    # verify steps by accepted drafts ([j]: steps that accepted j), when the server reports them
    # (SGLang 0.5.23 spec_correct_drafts_histogram, on the finished chunk)
    drafts_histogram: list[int] | None = None
    chunks: int | None = None  # stream chunks (one per verify step with speculation)
    # Its verify steps counted for P(>=k) by the tokens each carried: [n - 1] steps of n tokens
    # (harness.measure.step_acceptance); None: not counted (no speculation, or left out)
    step_tokens: list[int] | None = None
    round: int = 1  # the user's round with benchmark.rounds > 1 (harness.measure.rounds), else 1
    category: str | None = None  # the prompt's workload category (None: recorded before it was)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None and bool(self.completion_tokens)

    def decode_seconds(self) -> float | None:
        if not self.ok or self.first_token_s is None or self.end_s is None:
            return None
        return self.end_s - self.first_token_s


@dataclass
class RunSummary:
    """One measured run at one concurrency level."""

    run: int
    concurrency: int
    requests: int
    errors: int
    output_tokens: int
    decode_tok_s: float | None  # per-stream decode speed, tokens after the first / decode time
    e2e_tok_s: float | None  # per-stream speed including time to first token
    output_tok_s: float | None  # aggregate: tokens generated inside the run's window / window
    ttft_s: float | None
    accept_len: float | None
    accept_len_source: str | None
    truncated: int = 0  # finish_reason "length" before the reasoning ended
    ttft_p: dict[str, float] = field(default_factory=dict)  # p50/p90/p99 seconds
    itl_p: dict[str, float] = field(default_factory=dict)  # p50/p90/p99 seconds per token
    incomplete: bool = False  # a request missed its deadline: recorded, left out of the means
    # The /flush_cache before the run: True it worked (the server's cache and speculative counters
    # cover this run only), False it failed after every attempt (they span earlier runs too),
    # None no flush was asked for. flush_attempts: how many posts it took (or were made).
    flushed: bool | None = None
    flush_attempts: int = 0
    # The benchmark process's own CPU over the run (harness/measure/client_cpu.py): seconds, per
    # 1,000 output tokens, and as a share of one core over the run's wall time (None: not measured).
    client_cpu_s: float | None = None
    client_cpu_s_per_1k_tokens: float | None = None
    client_cpu_util: float | None = None
    # Time per output token after the first, per request: (end - first token) / (tokens - 1).
    tpot_p: dict[str, float] = field(default_factory=dict)  # p50/p90/p99 seconds per token
    # Steady state (C > 1, docs/benchmark.md): the window [open, close] on the server's clock,
    # the completions inside it, and the requests cut when it closed (not in `requests`).
    window: list[float] | None = None
    window_completions: int | None = None
    cut: int = 0
    # Memory inside the window (harness.measure.memory_probe): the decode lines' mean (and peak)
    # token usage, #running-req and #queue-req, the prefill lines' cache hit rate, the requests
    # retracted, and the mean prompt + output tokens of the window's completed requests.
    # memory_source: "log" (the lines), "metrics" (/metrics counter deltas over the run: hit rate
    # and retractions only), None (neither was there).
    token_usage_mean: float | None = None
    token_usage_max: float | None = None
    running_mean: float | None = None
    queue_mean: float | None = None
    cache_hit_rate: float | None = None
    retractions: int | None = None
    request_tokens_mean: float | None = None
    memory_source: str | None = None


# The RunSummary fields MLflow logs per run as steps (run.<name>_c<level>; the UI shows the
# last): sweep.tracking.runs writes them, analysis.folders rebuilds the same keys from a folder.
RUN_STEP_METRICS = (
    "decode_tok_s",
    "output_tok_s",
    "accept_len",
    "token_usage_mean",
    "queue_mean",
    "running_mean",
    "cache_hit_rate",
    "retractions",
)


# A trial's curves MLflow logs as stepped metrics: accept_len_by_window (step: the 256-token
# window) and accept_at_least_c<C> (step: the draft depth k). analysis reads them back as lists.
ACCEPT_BY_WINDOW = "accept_len_by_window"
AT_LEAST = "accept_at_least_c"


@dataclass
class StepHistogram:
    """P(>=k) at one concurrency level: the share of verify steps that yielded at least k + 1
    tokens (k accepted drafts), k = 1 .. the draft depth, from the server's per-request
    histograms or the stream's chunks (harness.measure.step_acceptance). 1 + sum(at_least) is
    the counted steps' accept length."""

    concurrency: int
    at_least: list[float] = field(default_factory=list)  # P(>=1), P(>=2), ...; empty: refused
    steps: int = 0  # the verify steps counted
    step_tokens: list[int] = field(default_factory=list)  # counted steps: [n - 1] carried n tokens
    requests: int = 0  # the requests whose steps were counted
    left_out: int = 0  # requests none of whose steps count (their chunks are not verify steps)
    # Verify steps that arrived inside another chunk (exact where the server reported its verify
    # count, else those a chunk over the per-step bound proves), and their share of all steps
    merged_steps: int = 0
    merged_share: float = 0.0
    refused: str | None = None  # why at_least is empty (stream interval, merged chunks, ...)
    # where the counts come from: "server" (every counted request's own histogram, exact),
    # "stream" (its chunks), "mixed"
    source: str = ""


@dataclass
class Stat:
    """Mean over runs with its spread; ci95 is the half-width of the 95% t-interval."""

    mean: float
    std: float
    cv: float
    ci95: float
    n: int
    values: list[float] = field(default_factory=list)


@dataclass
class TrialResult:
    name: str
    role: str  # "baseline" | "trial"
    outcome: Outcome
    engine: str
    simulated: bool
    clock_scale: float
    params: dict[str, Any]  # what was asked for, named after SGLang's flags
    effective: dict[str, Any] = field(default_factory=dict)  # what the server says it runs
    metrics: dict[str, float] = field(default_factory=dict)
    runs: list[RunSummary] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    folder: str = ""
    error: str | None = None
    log_excerpt: str | None = None
    startup_s: float | None = None  # server clock
    wall_s: float | None = None  # the whole trial, wall clock
    startup_wall_s: float | None = None  # launch to ready (or to the failure), wall clock
    teardown_s: float | None = None  # stop to process group gone and port free, wall clock
    number: int | None = None  # Optuna trial number, when the trial came from a study
    oom_kind: str | None = None  # "gpu" (too high), "kv_pool" (too low) or "host" (HiCache)
    # Why a crash happened, when the log says it is the engine's, not the configuration's:
    # "no_speculation" (harness.server.logs.crash_cause: this build cannot speculate here)
    crash_cause: str | None = None
    # the trial a duplicate / predicted_oom / known_crash result was taken from
    related: str | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. "drafter_bypassed"
    detect_s: float | None = None  # the server's fatal log line -> the harness noticing, wall
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES the server was started with (GPU slots)
    server_window: list[float] | None = None  # [launch, process group gone], epoch seconds
    # The lossless check, per prompt: prompt_id, tokens compared, first_divergent_token (None:
    # identical to the baseline's), compared ("output_ids" or "text": approximate index).
    lossless: list[dict[str, Any]] = field(default_factory=list)
    gpu_release_s: float | None = None  # tree gone -> its GPU memory free, wall (None: no NVML)
    # Accept length per 256 output tokens, from the stream's verify steps
    # (harness.measure.acceptance)
    accept_by_window: list[float] = field(default_factory=list)
    # P(>=k) per concurrency level, from the stream's verify steps (harness.measure.step_acceptance)
    step_histograms: list[StepHistogram] = field(default_factory=list)
    # Start-up: the server's own durations by phase (startup_load_weight_s, ..., server clock;
    # also in metrics) and the phases as the harness saw them begin ({phase, at_s}, wall seconds
    # from launch: harness.server.startup), a stalled start's last phase included.
    startup_phases: dict[str, float] = field(default_factory=dict)
    startup_marks: list[dict[str, Any]] = field(default_factory=list)
    # What the ready server lacked of what the harness parses, one line each
    # (harness.measure.surface_check; empty: all there)
    surface_mismatches: list[str] = field(default_factory=list)
    # Relaunches of this configuration whose runs are pooled into `runs` (the resolve phase,
    # sweep.study.answer.unresolved): round, folder, run numbers, outcome, wall_s each;
    # empty: one launch.
    resolve: list[dict[str, Any]] = field(default_factory=list)
    # A screening launch of this configuration (one run, sweep.study.model) whose runs are pooled
    # into `runs` ahead of this launch's, which started after them: trial, folder, run numbers,
    # wall_s each; empty: none.
    screens: list[dict[str, Any]] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = str(self.outcome)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        data = dict(data)
        data["outcome"] = Outcome(data["outcome"])
        data["runs"] = [RunSummary(**r) for r in data.get("runs", [])]
        data["step_histograms"] = [StepHistogram(**h) for h in data.get("step_histograms", [])]
        return cls(**data)

    def write(self, folder: Path) -> Path:
        path = folder / "result.json"
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def read(cls, folder: Path) -> TrialResult:
        return cls.from_dict(json.loads((folder / "result.json").read_text()))


def run_steps(runs: list[RunSummary]) -> list[tuple[str, float, int]]:
    """(run.<name>_c<level>, value, run number) of each run's finite RUN_STEP_METRICS: each run
    as a step, as MLflow logs them (sweep.tracking.runs, sweep.tracking.pooled)."""
    return [
        (f"run.{name}_c{r.concurrency}", float(value), r.run)
        for r in runs
        for name in RUN_STEP_METRICS
        if (value := getattr(r, name)) is not None and math.isfinite(value)
    ]


def stepped_metrics(result: TrialResult) -> list[tuple[str, float, int]]:
    """(name, value, step) of the trial's curves, as MLflow logs them (sweep.tracking.runs)."""
    metrics = [(ACCEPT_BY_WINDOW, float(v), i) for i, v in enumerate(result.accept_by_window)]
    for hist in result.step_histograms:
        name = f"{AT_LEAST}{hist.concurrency}"
        metrics += [(name, float(v), k) for k, v in enumerate(hist.at_least, start=1)]
    return metrics


def write_requests(path: Path, records: list[RequestRecord]) -> None:
    with path.open("w") as fh:
        for record in records:
            fh.write(json.dumps(asdict(record), sort_keys=True) + "\n")


def read_requests(path: Path) -> list[RequestRecord]:
    with path.open() as fh:
        return [RequestRecord(**json.loads(line)) for line in fh if line.strip()]
