"""Frozen, validated descriptions of what to launch and how to measure it.

The composed Hydra config becomes these dataclasses in one place (`sweep.config.specs`); nothing
downstream sees a DictConfig. Each `__post_init__` names the field, the value and the fix. Field
names follow SGLang's argument names, so `harness.server.command` derives the flags mechanically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.record.results import RunSummary
from harness.record.stats import summarize
from harness.sglang.adaptive import adaptive_unsupported_reason
from harness.sglang.speculative import EAGLE_FAMILY
from harness.sglang.surfaces import CURRENT, VERSIONS
from harness.workload import REASONING

ENGINES = ("sim", "sglang")
SGLANG_VERSIONS = VERSIONS  # the SGLang surfaces specsweep speaks (harness.sglang)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_range(name: str, value: float | None, low: float, high: float, hint: str = "") -> None:
    if value is None:
        return
    _check(
        low <= value <= high,
        f"{name}={value} is out of range: allowed {low}..{high}." + (f" {hint}" if hint else ""),
    )


@dataclass(frozen=True)
class EngineSpec:
    name: str  # "sim" or "sglang"
    program: tuple[str, ...]  # argv prefix, e.g. (python, -m, sglang.launch_server)
    sglang_version: str = CURRENT  # which flag/log surface to speak (harness.sglang)
    ready_timeout_s: float = 1800.0  # wall seconds
    stall_timeout_s: float | None = 600.0  # wall seconds of start-up silence (None: off)
    stop_grace_s: float = 30.0  # wall seconds between SIGTERM and SIGKILL
    gpu_release_timeout_s: float = 60.0  # wall seconds for a stopped tree's GPU memory (NVML)
    extra_args: tuple[str, ...] = ()  # engine-only flags (the simulator's --sim-* flags)

    def __post_init__(self) -> None:
        _check(
            self.name in ENGINES,
            f"engine={self.name!r} is unknown: use one of {', '.join(ENGINES)} "
            "(engine.name; engine=sim for the simulator, engine=sglang on a GPU box).",
        )
        _check(bool(self.program), "engine.program is empty: it must name the server program.")
        _check(
            self.sglang_version in SGLANG_VERSIONS,
            f"engine.sglang_version={self.sglang_version!r} is not supported: use one of "
            f"{', '.join(SGLANG_VERSIONS)}.",
        )
        for name in ("ready_timeout_s", "stall_timeout_s"):  # stall: None is off
            _check_range(f"engine.{name}", getattr(self, name), 1, 24 * 3600)
        _check_range("engine.stop_grace_s", self.stop_grace_s, 0, 600)
        _check_range("engine.gpu_release_timeout_s", self.gpu_release_timeout_s, 0, 3600)

    @property
    def simulated(self) -> bool:
        return self.name == "sim"


@dataclass(frozen=True)
class ServerSpec:
    """One SGLang server launch. Speculative fields are None for the baseline."""

    model_path: str
    tp_size: int = 1
    host: str = "127.0.0.1"
    port: int = 30000
    # SGLang's --api-key. Read from the environment variable server.api_key_env names; kept out of
    # repr and of everything recorded (harness.server.redact).
    api_key: str | None = field(default=None, repr=False)
    trust_remote_code: bool = False
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    context_length: int | None = None
    mem_fraction_static: float | None = None  # None: SGLang's own formula
    max_running_requests: int | None = None
    hicache_size: int = 0  # GB of host memory per TP rank; 0 disables HiCache
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int | None = None
    disable_overlap_schedule: bool = False
    enable_metrics: bool = True
    decode_log_interval: int = 40
    # SGLang's --stream-interval: tokens per stream chunk (None: SGLang's 1, not passed). Coarser
    # chunks cost the client less at high concurrency; ITL and per-position acceptance coarsen.
    stream_interval: int | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    # SGLang's runtime step adaptation (harness.sglang.adaptive; docs/adaptive.md): the
    # config is a JSON file path (None: SGLang's built-in ADAPTIVE_DEFAULT_CONFIG).
    speculative_adaptive: bool = False
    speculative_adaptive_config: str | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())  # added to the server's environment

    def __post_init__(self) -> None:
        _check(bool(self.model_path), "model.path is empty: set model.path=/path/to/model.")
        _check_range("model.tp", self.tp_size, 1, 64)
        _check_range("server.port", self.port, 1024, 65535)
        _check_range(
            "mem_fraction_static",
            self.mem_fraction_static,
            0.05,
            0.99,
            "It is the share of GPU memory for weights + KV cache; 0.80-0.93 is typical.",
        )
        _check_range("max_running_requests", self.max_running_requests, 1, 1 << 20)
        _check_range("hicache_size", self.hicache_size, 0, 4096, "It is GB per TP rank.")
        _check_range("cuda_graph_max_bs", self.cuda_graph_max_bs, 1, 4096)
        _check_range("decode_log_interval", self.decode_log_interval, 1, 100000)
        _check_range("stream_interval", self.stream_interval, 1, 100000)
        self._check_speculative()
        self._check_adaptive()

    def _check_adaptive(self) -> None:
        """SGLang serves adaptive only for EAGLE/EAGLE3 at topk 1, else falls back to static with
        a warning (harness.sglang.adaptive.adaptive_unsupported_reason): refused here."""
        if not self.speculative_adaptive:
            _check(
                self.speculative_adaptive_config is None,
                "server.speculative_adaptive_config is set but server.speculative_adaptive is "
                "false: set server.speculative_adaptive=true, or drop the config.",
            )
            return
        _check(
            self.speculative,
            "server.speculative_adaptive=true needs a drafter: choose one with drafter=<name> "
            "(the baseline has no speculation to adapt).",
        )
        reason = adaptive_unsupported_reason(
            self.speculative_algorithm, self.speculative_eagle_topk
        )
        _check(
            reason is None,
            f"server.speculative_adaptive=true with {reason}: SGLang would disable adaptive and "
            "serve static parameters (speculative_hook.py _maybe_disable_adaptive). Use "
            "server.speculative_eagle_topk=1 (or leave steps/topk/draft unset) with an EAGLE or "
            "EAGLE3 drafter, or set server.speculative_adaptive=false.",
        )

    def _check_speculative(self) -> None:
        spec = (
            self.speculative_num_steps,
            self.speculative_eagle_topk,
            self.speculative_num_draft_tokens,
        )
        if self.speculative_algorithm is None:
            _check(
                all(v is None for v in spec) and self.speculative_draft_model_path is None,
                "speculative parameters are set but no drafter is selected: choose one with "
                "drafter=<name> or leave the speculative_* values unset for the baseline.",
            )
            return
        algo = self.speculative_algorithm.upper()
        _check(
            algo in EAGLE_FAMILY,
            f"drafter.algorithm={self.speculative_algorithm!r} is not an EAGLE-family algorithm "
            f"({', '.join(EAGLE_FAMILY)}); EAGLE-3 drafters need EAGLE3.",
        )
        _check(
            all(v is None for v in spec) or all(v is not None for v in spec),
            "set all three of speculative_num_steps, speculative_eagle_topk and "
            "speculative_num_draft_tokens, or none of them: SGLang fails with a bare "
            "AssertionError on a partial set.",
        )
        steps, topk, draft = spec
        if steps is None:
            return
        # Adaptive may start at 0 steps (drafting off) when the config lists 0.
        _check_range("speculative_num_steps", steps, 0 if self.speculative_adaptive else 1, 16)
        _check_range("speculative_eagle_topk", topk, 1, 16)
        _check_range("speculative_num_draft_tokens", draft, 1 if steps == 0 else 2, 256)
        assert topk is not None and draft is not None
        _check(
            draft <= topk * steps + 1,
            f"speculative_num_draft_tokens={draft} exceeds speculative_eagle_topk * "
            f"speculative_num_steps + 1 = {topk * steps + 1}: the draft tree cannot hold that "
            "many tokens. Lower the draft tokens or raise topk/steps.",
        )

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"


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


@dataclass(frozen=True)
class TrialSpec:
    """One trial: what to launch, how to measure it, and how its drafter is checked first."""

    name: str
    role: str  # "trial" | "baseline"
    number: int | None
    engine: EngineSpec
    server: ServerSpec
    benchmark: BenchmarkSpec
    params: dict[str, Any] = field(default_factory=dict)  # requested values, SGLang's names
    early_stop: EarlyStop | None = None
    pid_file: Path | None = None  # records the live server so a crashed sweep's leftover is found
    drafter_check: str = "static"  # static | deep | off (harness.drafter_gate)
    drafter_cache: Path | None = None  # where drafter verdicts are kept; None: not kept
    # The baseline's lossless.jsonl (harness.measure.lossless) to compare this trial's outputs with;
    # None: the outputs are written, not compared (the baseline itself, a single trial).
    lossless_reference: Path | None = None
