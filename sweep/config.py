"""The one place where a composed Hydra config becomes the harness's frozen specs.

Everything that can be checked without launching anything is checked here, so a bad value fails
in the first second with a message that names it, never after a model has loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.bench import BenchmarkSpec, EarlyStop
from harness.errors import ConfigError
from harness.flags import engine_python, installed_sglang_version, surface_of
from harness.layout import ResultsLayout
from harness.prompts import load_prompts
from harness.spec import EngineSpec, ServerSpec

SEARCHED = (
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "hicache_size",
)
# Every trial's MLflow params carry exactly these keys (plus effective.<EFFECTIVE_KEYS>), so the
# compare view lines trials up whatever their outcome.
PARAM_KEYS = (
    *SEARCHED,
    "drafter",
    "speculative_algorithm",
    "cuda_graph",
    "tp_size",
    "model",
    "hardware",
    "max_tokens",
)
# What /server_info reports that is recorded as effective.<name> (both SGLang versions' names).
EFFECTIVE_KEYS = (
    *SEARCHED,
    "speculative_algorithm",
    "max_running_requests",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs",
    "disable_overlap_schedule",
    "max_total_num_tokens",
    "tp_size",
    "cuda_visible_devices",
)


@dataclass(frozen=True)
class TrialSpec:
    name: str
    role: str  # "trial" | "baseline"
    number: int | None
    engine: EngineSpec
    server: ServerSpec
    benchmark: BenchmarkSpec
    params: dict[str, Any] = field(default_factory=dict)  # requested values, SGLang's names
    early_stop: EarlyStop | None = None
    pid_file: Path | None = None  # records the live server so a crashed sweep's leftover is found


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~"))


@functools.lru_cache(maxsize=8)
def detected_surface(program: tuple[str, ...]) -> str:
    """engine.sglang_version unset: the flag surface of the SGLang the engine's Python has.

    Without a readable SGLang it is the current surface (0.5.23); preflight's engine check then
    fails with what to install, before anything launches."""
    python = engine_python(program)
    version = installed_sglang_version(python) if python else None
    return surface_of(version) if version else "0.5.23"


def build_engine_spec(cfg: DictConfig) -> EngineSpec:
    engine = cfg.engine
    extra = list(engine.extra_args)
    version = engine.sglang_version
    if version is None:
        if engine.name == "sim":
            version = "0.5.23"  # the simulator's default surface
        else:
            program = tuple(engine.program)
            if program[0] == "python":  # harness.command runs it with this interpreter
                program = (sys.executable, *program[1:])
            version = detected_surface(program)
    if engine.name == "sim":
        if engine.clock_scale <= 0:
            raise ConfigError(f"engine.clock_scale={engine.clock_scale}: must be > 0.")
        extra += [
            "--sim-clock-scale",
            str(engine.clock_scale),
            "--sim-seed",
            str(cfg.benchmark.seed),
        ]
        for flag, value in (
            ("--sim-hardware", cfg.hardware.sim_profile),
            ("--sim-target", cfg.model.sim_profile),
            ("--sim-drafter", cfg.drafter.sim_profile if cfg.drafter.path else None),
        ):
            if value:
                extra += [flag, str(value)]
        extra += ["--sim-sglang-version", version]
    return EngineSpec(
        name=engine.name,
        program=tuple(engine.program),
        sglang_version=version,
        ready_timeout_s=engine.ready_timeout_s,
        stop_grace_s=engine.stop_grace_s,
        gpu_release_timeout_s=engine.gpu_release_timeout_s,
        extra_args=tuple(extra),
    )


def _api_key(variable: str | None) -> str | None:
    """SGLang's --api-key comes from the environment: the config names the variable only, so the
    key is in no config file, override or record."""
    if not variable:
        return None
    key = os.environ.get(variable)
    if not key:
        raise ConfigError(
            f"server.api_key_env={variable}: the environment variable {variable} is not set. "
            f"Export {variable}=<key> before the sweep, or set server.api_key_env=null."
        )
    return key


def build_server_spec(cfg: DictConfig) -> ServerSpec:
    s, model, drafter = cfg.server, cfg.model, cfg.drafter
    if cfg.engine.name == "sglang":
        for what, path in (("model.path", model.path), ("drafter.path", drafter.path)):
            if path and _looks_local(path) and not Path(path).expanduser().exists():
                raise ConfigError(
                    f"{what}={path!r} does not exist on this machine. Point it at the "
                    "checkpoint directory (or a Hugging Face id the box can download)."
                )
    speculative = drafter.path is not None
    return ServerSpec(
        model_path=model.path,
        tp_size=model.tp,
        host=s.host,
        port=s.port,
        api_key=_api_key(s.api_key_env),
        trust_remote_code=model.trust_remote_code,
        reasoning_parser=model.reasoning_parser,
        tool_call_parser=model.tool_call_parser,
        context_length=model.context_length,
        mem_fraction_static=s.mem_fraction_static,
        max_running_requests=s.max_running_requests,
        hicache_size=s.hicache_size,
        disable_cuda_graph=not s.cuda_graph,
        cuda_graph_max_bs=s.cuda_graph_max_bs,
        disable_overlap_schedule=s.disable_overlap_schedule,
        enable_metrics=s.enable_metrics,
        decode_log_interval=s.decode_log_interval,
        speculative_algorithm=drafter.algorithm if speculative else None,
        speculative_draft_model_path=drafter.path,
        speculative_num_steps=s.speculative_num_steps,
        speculative_eagle_topk=s.speculative_eagle_topk,
        speculative_num_draft_tokens=s.speculative_num_draft_tokens,
        extra_args=tuple(s.extra_args),
        env=tuple(sorted(_server_env(cfg).items())),
    )


def _server_env(cfg: DictConfig) -> dict[str, str]:
    env = {str(k): str(v) for k, v in cfg.hardware.env.items()}
    if cfg.trial.gpus is not None:  # the trial's GPU slot (sweep.slots)
        env["CUDA_VISIBLE_DEVICES"] = str(cfg.trial.gpus)
    return env


def build_benchmark_spec(cfg: DictConfig) -> BenchmarkSpec:
    b = cfg.benchmark
    load_prompts(b.prompts, b.seed)  # a malformed prompt file fails here, not after a launch
    return BenchmarkSpec(
        model=cfg.model.path,
        prompts=b.prompts,
        api=b.api,
        max_tokens=b.max_tokens,
        warmup=b.warmup,
        runs=b.runs,
        concurrency=tuple(b.concurrency),
        requests_per_run=b.requests_per_run,
        requests_per_level=tuple(b.requests_per_level),
        temperature=b.temperature,
        ignore_eos=b.ignore_eos,
        thinking=b.thinking,
        request_timeout_s=b.request_timeout_s,
        min_request_tok_s=b.min_request_tok_s,
        seed=b.seed,
        adaptive=b.adaptive,
        target_ci_pct=b.target_ci_pct,
        max_runs=b.max_runs,
    )


def build_trial_spec(cfg: DictConfig) -> TrialSpec:
    """Validate everything and freeze it. Raises ConfigError naming the bad field."""
    if cfg.trial.role not in ("trial", "baseline"):
        raise ConfigError(f"trial.role={cfg.trial.role!r}: use trial or baseline.")
    if cfg.model.tp > cfg.hardware.gpus:
        raise ConfigError(
            f"model.tp={cfg.model.tp} needs more GPUs than hardware.gpus={cfg.hardware.gpus}."
        )
    server = build_server_spec(cfg)
    params = {name: getattr(server, name) for name in SEARCHED}
    params.update(
        drafter=cfg.drafter.name,
        speculative_algorithm=server.speculative_algorithm,
        cuda_graph=cfg.server.cuda_graph,
        tp_size=server.tp_size,
        model=cfg.model.name,
        hardware=cfg.hardware.name,
        max_tokens=cfg.benchmark.max_tokens,
    )
    early_stop = None
    if cfg.trial.prune_below is not None:
        early_stop = EarlyStop(
            below=cfg.trial.prune_below,
            concurrency=cfg.trial.prune_concurrency,
            metric=cfg.trial.prune_metric,
        )
    return TrialSpec(
        name=cfg.trial.name,
        role=cfg.trial.role,
        number=cfg.trial.number,
        engine=build_engine_spec(cfg),
        server=server,
        benchmark=build_benchmark_spec(cfg),
        params=params,
        early_stop=early_stop,
        pid_file=Path(cfg.trial.pid_file)
        if cfg.trial.pid_file
        else ResultsLayout.at(cfg.tracking.dir).server_pid_file(server.port),
    )


def check_drafter(cfg: DictConfig, spec: TrialSpec) -> None:
    """Raise ConfigError when the trial's drafter would fail (see sweep.drafter_gate)."""
    from sweep.drafter_gate import drafter_problems

    problems = drafter_problems(
        spec.server.speculative_draft_model_path,
        spec.server.model_path,
        spec.server.speculative_algorithm or "EAGLE3",
        cfg.drafter.check,
        ResultsLayout.at(cfg.tracking.dir).drafter_checks,
    )
    if problems:
        raise ConfigError(problems)


def setup_key(cfg: DictConfig) -> str:
    """What a measurement depends on besides the searched values: a study reuses a baseline,
    and recognises a duplicate trial, only while this is unchanged."""
    parts = {
        group: OmegaConf.to_container(cfg[group], resolve=True)
        for group in ("engine", "model", "hardware", "benchmark")
    }
    server = OmegaConf.to_container(cfg.server, resolve=True)
    assert isinstance(server, dict)
    parts["server"] = {k: v for k, v in server.items() if k not in SEARCHED and k != "port"}
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def check_launch_flags(specs: list[TrialSpec]) -> None:
    """Parse the launches a sweep will make with the parser that will run them, before any does:
    the simulator's for engine=sim, SGLang's own when the engine's Python has SGLang."""
    from harness.command import server_flags
    from harness.flags import parse_with_sglang, sim_parser_problems, version_problems

    problems: list[str] = []
    for spec in specs:
        flags = [*server_flags(spec.server, spec.engine.sglang_version), *spec.engine.extra_args]
        problems += version_problems(flags, spec.engine.sglang_version)
        if spec.engine.simulated:
            problems += sim_parser_problems(flags, spec.engine.sglang_version)
            continue
        program = spec.engine.program
        python = engine_python(
            (sys.executable, *program[1:]) if program[0] == "python" else program
        )
        if python is None or installed_sglang_version(python) is None:
            continue  # preflight says SGLang is missing; the version table already ran
        for result in parse_with_sglang(python, [flags]):
            if result["error"]:
                problems.append(result["error"])
    if problems:
        raise ConfigError(
            "SGLang would refuse this launch: "
            + " | ".join(dict.fromkeys(problems))
            + " (Flags come from the server, model and drafter groups, server.extra_args and "
            "engine.extra_args; engine.sglang_version picks the SGLang version to speak.)"
        )
