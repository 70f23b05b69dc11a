"""Frozen, validated descriptions of what to launch and how to measure it.

The composed Hydra config becomes these dataclasses in one place (`sweep.config.specs`); nothing
downstream sees a DictConfig. Each `__post_init__` names the field, the value and the fix. Field
names follow SGLang's argument names, so `harness.server.command` derives the flags mechanically.
How a trial is measured (BenchmarkSpec, EarlyStop) lives in `harness.benchmark_spec`, and is
named here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.benchmark_spec import BenchmarkSpec, EarlyStop
from harness.errors import ConfigError
from harness.sglang.adaptive import adaptive_unsupported_reason
from harness.sglang.speculative import EAGLE_FAMILY
from harness.sglang.surfaces import CURRENT, VERSIONS

ENGINES = ("sim", "sglang")
SGLANG_VERSIONS = VERSIONS  # the SGLang surfaces specsweep speaks (harness.sglang)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


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
