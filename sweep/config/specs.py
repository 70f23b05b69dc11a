"""The one place where a composed Hydra config becomes the harness's frozen specs: EngineSpec,
ServerSpec, BenchmarkSpec and the TrialSpec that holds them, with the MLflow params a trial carries.

Everything that can be checked without launching anything is checked here, so a bad value fails
in the first second with a message that names it, never after a model has loaded.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness.errors import ConfigError
from harness.measure.prompt_plan import check_fits
from harness.record.layout import ResultsLayout
from harness.server.adaptive_config import check_initial_steps, load_adaptive_config
from harness.server.command import engine_program
from harness.server.flags import detected_surface
from harness.sglang.speculative import SPEC_MAX_RUNNING_REQUESTS
from harness.sglang.surfaces import CURRENT
from harness.spec import BenchmarkSpec, EarlyStop, EngineSpec, ServerSpec, TrialSpec
from harness.workload import load_prompts
from sweep.config.drafter_check import drafter_cache
from sweep.config.workload import sampling_choice, workload_choice

SEARCHED = (
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "hicache_size",
    "speculative_adaptive",
    "speculative_adaptive_config",
)
# Every trial's MLflow params carry exactly these keys (plus effective.<harness.trial's
# EFFECTIVE_KEYS>), so the compare view lines trials up whatever their outcome.
PARAM_KEYS = (
    *SEARCHED,
    "drafter",
    "speculative_algorithm",
    "cuda_graph",
    "tp_size",
    "model",
    "hardware",
    "max_tokens",
    "workload",
    "temperature",
    "top_p",
    "top_k",
)


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~"))


def build_engine_spec(cfg: DictConfig) -> EngineSpec:
    engine = cfg.engine
    extra = list(engine.extra_args)
    version = engine.sglang_version
    if version is None:
        if engine.name == "sim":
            version = CURRENT  # the simulator's default surface
        else:
            version = detected_surface(engine_program(engine.program))
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
        stall_timeout_s=engine.stall_timeout_s,
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
        max_running_requests=_max_running(cfg, speculative),
        hicache_size=s.hicache_size,
        disable_cuda_graph=not s.cuda_graph,
        cuda_graph_max_bs=s.cuda_graph_max_bs,
        disable_overlap_schedule=s.disable_overlap_schedule,
        enable_metrics=s.enable_metrics,
        decode_log_interval=s.decode_log_interval,
        stream_interval=s.stream_interval,
        speculative_algorithm=drafter.algorithm if speculative else None,
        speculative_draft_model_path=drafter.path,
        speculative_num_steps=s.speculative_num_steps,
        speculative_eagle_topk=s.speculative_eagle_topk,
        speculative_num_draft_tokens=s.speculative_num_draft_tokens,
        speculative_adaptive=s.speculative_adaptive,
        speculative_adaptive_config=_adaptive_config(s, speculative),
        extra_args=tuple(s.extra_args),
        env=tuple(sorted(_server_env(cfg).items())),
    )


def _adaptive_config(s: DictConfig, speculative: bool) -> str | None:
    """The adaptive config's absolute path (the server may run elsewhere), read and checked as
    SGLang reads it; the steps an adaptive server starts at must be one of its candidates."""
    path = s.speculative_adaptive_config
    if not (s.speculative_adaptive and speculative):
        return path  # ServerSpec says what is wrong with the combination
    where = f"server.speculative_adaptive_config={path!r}" if path else "SGLang's default config"
    check_initial_steps(load_adaptive_config(path), s.speculative_num_steps, where)
    return str(Path(path).expanduser().resolve()) if path else None


def _max_running(cfg: DictConfig, speculative: bool) -> int | None:
    """The baseline gets the cap SGLang gives a speculative server whose max_running_requests is
    unset (48: harness.sglang), unless search.baseline_equal_caps is off
    (sweep.study.answer.equal_caps)."""
    value = cfg.server.max_running_requests
    equal = OmegaConf.select(cfg, "search.baseline_equal_caps", default=True)
    if value is None and not speculative and cfg.trial.role == "baseline" and equal:
        return SPEC_MAX_RUNNING_REQUESTS
    return value


def _server_env(cfg: DictConfig) -> dict[str, str]:
    env = {str(k): str(v) for k, v in cfg.hardware.env.items()}
    if cfg.trial.gpus is not None:  # the trial's GPU slot (sweep.launch.slots)
        env["CUDA_VISIBLE_DEVICES"] = str(cfg.trial.gpus)
    return env


def build_benchmark_spec(cfg: DictConfig) -> BenchmarkSpec:
    b = cfg.benchmark
    name, source, categories = workload_choice(cfg)
    # a malformed prompt file or an unknown category fails here, not after a launch
    load_prompts(source, b.seed, categories)
    sampling = sampling_choice(cfg)
    return BenchmarkSpec(
        model=cfg.model.path,
        prompts=source,
        workload=name,
        categories=categories,
        api=b.api,
        max_tokens=b.max_tokens,
        warmup=b.warmup,
        runs=b.runs,
        concurrency=tuple(b.concurrency),
        requests_per_run=b.requests_per_run,
        requests_per_level=tuple(b.requests_per_level),
        window_completions=b.get("window_completions"),
        rounds=b.rounds,
        users=b.users,
        temperature=sampling["temperature"],
        top_p=sampling["top_p"],
        top_k=sampling["top_k"],
        sampling_source=sampling["source"],
        ignore_eos=b.ignore_eos,
        thinking=b.thinking,
        request_timeout_s=b.request_timeout_s,
        min_request_tok_s=b.min_request_tok_s,
        seed=b.seed,
        adaptive=b.adaptive,
        target_ci_pct=b.target_ci_pct,
        max_runs=b.max_runs,
        lossless_check=b.lossless_check,
        lossless_max_tokens=b.lossless_max_tokens,
    )


def _fitting(spec: BenchmarkSpec) -> BenchmarkSpec:
    """The spec, once its workload is known to hold the prompt plan
    (harness.measure.prompt_plan)."""
    check_fits(load_prompts(spec.prompts, spec.seed, spec.categories), spec)
    return spec


def _relaunch(bench: BenchmarkSpec, trial: DictConfig) -> BenchmarkSpec:
    """A resolve relaunch (sweep.study.answer.unresolved): `trial.runs` more runs numbered from
    `trial.first_run` (the prompt plan and max_runs unchanged, so run r sends what run r of every
    trial sent), exactly that many, and no lossless check: its first launch did it."""
    first = int(trial.get("first_run", 1) or 1)
    if trial.get("runs") is None:
        return bench if first == 1 else replace(bench, first_run=first)
    return replace(bench, first_run=first, runs=int(trial.runs), adaptive=False, lossless_check=0)


MAX_GPUS = 1024  # a node's GPUs; more is a typo (and would build a list of that many ids)


def build_trial_spec(cfg: DictConfig) -> TrialSpec:
    """Validate everything and freeze it. Raises ConfigError naming the bad field."""
    if cfg.trial.role not in ("trial", "baseline"):
        raise ConfigError(f"trial.role={cfg.trial.role!r}: use trial or baseline.")
    gpus = cfg.hardware.gpus
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise ConfigError(
            f"hardware.gpus={gpus!r}: the GPUs of one node, 1..{MAX_GPUS} (e.g. hardware.gpus=8)."
        )
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
    bench = _relaunch(build_benchmark_spec(cfg), cfg.trial)
    params.update(
        workload=bench.workload, temperature=bench.temperature, top_p=bench.top_p, top_k=bench.top_k
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
        benchmark=_fitting(bench),
        params=params,
        early_stop=early_stop,
        pid_file=Path(cfg.trial.pid_file)
        if cfg.trial.pid_file
        else ResultsLayout.at(cfg.tracking.dir).server_pid_file(server.port),
        drafter_check=cfg.drafter.check,
        drafter_cache=drafter_cache(cfg),
        lossless_reference=Path(cfg.trial.lossless_reference)
        if cfg.trial.lossless_reference
        else None,
    )
