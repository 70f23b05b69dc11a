"""How a trial is measured, frozen and validated: the benchmark (runs, levels, prompts, sampling,
the lossless check) and when a trial stops early. `harness.spec` holds what is launched and the
TrialSpec that carries these; the composed config becomes them in `sweep.config.specs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.record.results import RunSummary
from harness.record.stats import summarize
from harness.workload import REASONING


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


APIS = ("chat", "generate")


@dataclass(frozen=True)
class BenchmarkSpec:
    model: str  # the "model" field of each request
    prompts: str = "builtin"  # the workload's source: builtin (harness/data) or a file
    workload: str = "reasoning"  # the workload's name (conf/benchmark/workload/)
    categories: tuple[str, ...] = REASONING  # the categories drawn from the source; (): all
    api: str = "chat"  # chat: /v1/chat/completions; generate: SGLang's native /generate
    max_tokens: int = 2048
    warmup: int = 2
    runs: int = 5
    concurrency: tuple[int, ...] = (1,)
    requests_per_run: int = 3  # a run's requests at concurrency 1, unless...
    # ...given per level, aligned with concurrency: at 1 a run's requests, above 1 the
    # completions inside the steady-state window (window_at)
    requests_per_level: tuple[int, ...] = ()
    # Completions inside a steady-state window at concurrency C > 1 (docs/benchmark.md,
    # "Steady-state throughput"); None: max(C, 16).
    window_completions: int | None = None
    rounds: int = 1  # > 1: each steady-state slot is a user of this many rounds (measure.rounds)
    users: int = 0  # conversations open at once with rounds > 1; 0: one per slot (C)
    # Sampling of every measured request (the lossless check is always greedy): from the model's
    # config group or its generation_config.json (sweep.config.workload); temperature 0 is greedy.
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None  # None: not sent (SGLang: -1, the whole vocabulary)
    sampling_source: str = ""  # where the values came from, for the record
    ignore_eos: bool = False
    thinking: bool = True  # chat template reasoning mode (Kimi/Qwen "thinking")
    # Per-request deadline, wall seconds. None: derived from max_tokens at min_request_tok_s,
    # a rate far below any working server, so only a stalled request misses it.
    request_timeout_s: float | None = None
    min_request_tok_s: float = 5.0
    seed: int = 0
    adaptive: bool = False  # add runs until the 95% interval is within target_ci_pct
    target_ci_pct: float = 2.0
    max_runs: int = 20
    # The number of the first measured run at each level: 1, or after the runs a trial recorded
    # for a resolve relaunch (sweep.study.answer.unresolved). Run r sends the prompt plan's segment
    # r, so run r of every trial and of the baseline sends the same prompts.
    first_run: int = 1
    # The lossless check (harness.measure.lossless): this many prompts, greedy, lossless_max_tokens
    # each, compared with the baseline's outputs after the measured runs. 0: off.
    lossless_check: int = 4
    lossless_max_tokens: int = 256

    def __post_init__(self) -> None:
        checks = [
            (self.api in APIS, f"benchmark.api={self.api!r}: use one of {', '.join(APIS)}"),
            (1 <= self.max_tokens <= 262144, f"benchmark.max_tokens={self.max_tokens}: 1..262144"),
            (0 <= self.warmup <= 1000, f"benchmark.warmup={self.warmup}: 0..1000"),
            (1 <= self.runs <= 1000, f"benchmark.runs={self.runs}: 1..1000"),
            (bool(self.concurrency), "benchmark.concurrency is empty: give e.g. [1]"),
            (
                all(_is_int(c) and 1 <= c <= 4096 for c in self.concurrency),
                f"benchmark.concurrency={list(self.concurrency)}: each level 1..4096",
            ),
            (
                1 <= self.requests_per_run <= 100000,
                f"benchmark.requests_per_run={self.requests_per_run}: 1..100000",
            ),
            (
                not self.requests_per_level
                or (
                    len(self.requests_per_level) == len(self.concurrency)
                    and all(_is_int(n) and n >= 1 for n in self.requests_per_level)
                ),
                f"benchmark.requests_per_level={list(self.requests_per_level)}: one count >= 1 per "
                f"concurrency level {list(self.concurrency)}",
            ),
            (
                self.window_completions is None or 1 <= self.window_completions <= 100000,
                f"benchmark.window_completions={self.window_completions}: 1..100000 (or null)",
            ),
            (1 <= self.rounds <= 1000, f"benchmark.rounds={self.rounds}: 1..1000"),
            (0 <= self.users <= 100000, f"benchmark.users={self.users}: 0..100000 (0: C)"),
            (self.rounds == 1 or self.api == "chat", "benchmark.rounds > 1: needs api=chat"),
            (
                0.0 <= self.temperature <= 2.0,
                f"model.sampling.temperature={self.temperature} ({self.sampling_source or 'set'}): "
                "0..2, 0 for greedy",
            ),
            (
                0.0 < self.top_p <= 1.0,
                f"model.sampling.top_p={self.top_p} ({self.sampling_source or 'set'}): (0, 1], "
                "1 for no nucleus cut",
            ),
            (
                self.top_k is None or self.top_k == -1 or (_is_int(self.top_k) and self.top_k >= 1),
                f"model.sampling.top_k={self.top_k} ({self.sampling_source or 'set'}): -1 (off), "
                ">= 1, or null to leave it unset",
            ),
            (
                self.request_timeout_s is None or self.request_timeout_s > 0,
                f"benchmark.request_timeout_s={self.request_timeout_s}: must be > 0 (or null to "
                "derive it from max_tokens)",
            ),
            (
                self.min_request_tok_s > 0,
                f"benchmark.min_request_tok_s={self.min_request_tok_s}: must be > 0",
            ),
            (0 < self.target_ci_pct <= 100, "benchmark.target_ci_pct must be in (0, 100]"),
            (self.max_runs >= self.runs, "benchmark.max_runs must be >= benchmark.runs"),
            (self.first_run >= 1, f"trial.first_run={self.first_run}: >= 1"),
            (
                0 <= self.lossless_check <= 1000,
                f"benchmark.lossless_check={self.lossless_check}: 0..1000 prompts (0: off)",
            ),
            (
                1 <= self.lossless_max_tokens <= 262144,
                f"benchmark.lossless_max_tokens={self.lossless_max_tokens}: 1..262144",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"{message} (out of range).")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def request_deadline_s(self) -> float:
        """Wall seconds a request may take: 60 s for queueing and prefill, then max_tokens at
        min_request_tok_s (2048 tokens: 470 s)."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return 60.0 + self.max_tokens / self.min_request_tok_s

    @property
    def objective_concurrency(self) -> int:
        """Single-stream if measured, else the first level."""
        return 1 if 1 in self.concurrency else self.concurrency[0]

    def requests_at(self, concurrency: int) -> int:
        """The requests a run sends (the prompts the prompt plan gives it): at concurrency 1
        requests_per_run (or the level's requests_per_level entry); above 1 a steady-state run's
        C of ramp-up, its window's completions and the C - 1 cut when the window closes."""
        if concurrency > 1:
            return 2 * concurrency + self.window_at(concurrency) - 1
        if self.requests_per_level:
            return self.requests_per_level[self.concurrency.index(concurrency)]
        return max(self.requests_per_run, concurrency)

    def window_at(self, concurrency: int) -> int:
        """Completions inside a steady-state window at `concurrency` > 1: the level's
        requests_per_level entry, else window_completions, else max(C, 16): every slot turns
        over about once inside the window (once more in the ramp-up before it), and at least 16
        requests for the per-request percentiles. A run then costs about 2.5 waves of C."""
        if self.requests_per_level:
            return self.requests_per_level[self.concurrency.index(concurrency)]
        return self.window_completions or max(concurrency, 16)


@dataclass(frozen=True)
class EarlyStop:
    """Stop once this configuration's 95% upper bound is below `below` (the best trial's lower
    bound): more runs could not make it the best, only cost GPU time."""

    below: float
    concurrency: int
    metric: str = "decode_tok_s"  # a RunSummary field: decode_tok_s or output_tok_s
    min_runs: int = 2

    def should_stop(self, runs: list[RunSummary]) -> bool:
        values = [
            getattr(r, self.metric)
            for r in runs
            if r.concurrency == self.concurrency and getattr(r, self.metric) is not None
        ]
        if len(values) < self.min_runs:
            return False
        stat = summarize(values)
        return stat.mean + stat.ci95 < self.below
