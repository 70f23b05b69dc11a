"""Typed schemas for the config groups: a typo or a wrong type fails at composition.

Each group's YAML files (conf/<group>/*.yaml) fill these dataclasses; `conf/config.yaml` starts
from `specsweep_schema`. Ranges and cross-field rules are checked later, once, when the composed
config becomes the harness's frozen specs (`sweep.config.specs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class EngineConfig:
    name: str = MISSING  # sim | sglang
    program: List[str] = MISSING  # "python" means the harness's own interpreter
    # A program prefix that runs a Python where the engine runs, for a program that is not one
    # (docker run, srun, a wrapper script): preflight reads SGLang's version and parser with it.
    probe: List[str] = field(default_factory=list)
    sglang_version: Optional[str] = None  # flag surface (sglang.surfaces.VERSIONS); None: detect
    clock_scale: float = 1.0  # simulated seconds per wall second (sim only)
    ready_timeout_s: float = 1800.0  # wall seconds until the server must be ready
    # Wall seconds a start-up may print nothing before it counts as stalled (outcome timeout,
    # "stalled at <phase>"); JIT and autotune steps are silent for minutes. null: off.
    stall_timeout_s: Optional[float] = 600.0
    stop_grace_s: float = 30.0
    gpu_release_timeout_s: float = 60.0  # after a stop, until its processes hold no GPU memory
    extra_args: List[str] = field(default_factory=list)


@dataclass
class SamplingConfig:
    """How the model is served: the sampling every benchmark request asks for."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: Optional[int] = None  # None: not sent (SGLang's default, -1: the whole vocabulary)
    # A local checkpoint's (or cached hub snapshot's) generation_config.json overrides the
    # values above with its own, as the model's authors set them; false: the values above.
    from_generation_config: bool = True


@dataclass
class ModelConfig:
    name: str = MISSING
    path: str = MISSING
    tp: int = 1
    reasoning_parser: Optional[str] = None
    tool_call_parser: Optional[str] = None
    trust_remote_code: bool = False
    context_length: Optional[int] = None
    sim_profile: Optional[str] = None  # the simulator's target profile
    # Host memory the server's processes need besides HiCache (assumed; not the checkpoint, which
    # SGLang reads through the page cache: harness.sglang.host_memory, docs/preflight.md).
    host_ram_gb: float = 64.0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)


@dataclass
class DrafterConfig:
    name: str = "none"
    path: Optional[str] = None  # None: no speculation (the baseline)
    algorithm: str = "EAGLE3"
    sim_profile: Optional[str] = None  # the simulator's acceptance profile for this drafter
    check: str = "static"  # before launch: static (config + headers), deep (+ CPU forward), off


@dataclass
class HardwareConfig:
    name: str = MISSING
    gpu: str = MISSING
    gpus: int = 8
    gpu_memory_gb: float = MISSING
    host_ram_gb: float = MISSING
    env: Dict[str, str] = field(default_factory=dict)  # NCCL and friends, exported to the server
    sim_profile: Optional[str] = None


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"  # loopback: the server is reachable from this machine only
    port: int = 30000
    api_key_env: Optional[str] = None  # names the variable holding SGLang's --api-key
    cuda_graph: bool = True
    cuda_graph_max_bs: Optional[int] = None
    max_running_requests: Optional[int] = None
    disable_overlap_schedule: bool = False
    enable_metrics: bool = True
    decode_log_interval: int = 40
    stream_interval: Optional[int] = None  # --stream-interval: tokens per stream chunk; null: 1
    mem_fraction_static: Optional[float] = None
    hicache_size: int = 0
    speculative_num_steps: Optional[int] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_num_draft_tokens: Optional[int] = None
    # SGLang's runtime step adaptation (EAGLE/EAGLE3, topk 1; docs/adaptive.md) and its JSON
    # config (null: SGLang's built-in default; `python -m sweep.adaptive` writes a measured one).
    speculative_adaptive: bool = False
    speculative_adaptive_config: Optional[str] = None
    extra_args: List[str] = field(default_factory=list)


@dataclass
class WorkloadConfig:
    """The prompts (conf/benchmark/workload/): a source and the categories drawn from it."""

    name: str = "reasoning"
    source: Optional[str] = "builtin"  # builtin (harness/data) or a path: JSONL, messages, ShareGPT
    categories: List[str] = field(default_factory=list)  # empty: every prompt of the source


@dataclass
class BenchmarkConfig:
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sampling: str = "model"  # model: model.sampling (and generation_config.json) | greedy
    # Deprecated alias: benchmark.prompts=PATH is benchmark/workload=file with that source.
    prompts: Optional[str] = None
    api: str = "chat"  # chat (/v1/chat/completions) | generate (SGLang's /generate)
    max_tokens: int = 2048
    warmup: int = 2
    runs: int = 5
    concurrency: List[int] = field(default_factory=lambda: [1])
    requests_per_run: int = 3
    requests_per_level: List[int] = field(default_factory=list)  # one per level, or empty
    window_completions: Optional[int] = None  # C > 1: completions in the window; null: max(C, 16)
    rounds: int = 1  # C > 1: each slot a user of this many chat rounds (harness.measure.rounds)
    users: int = 0  # with rounds > 1: conversations open at once (>= C; 0: C)
    # Deprecated: set model.sampling.temperature, or benchmark.sampling=greedy for 0.
    temperature: Optional[float] = None
    ignore_eos: bool = False
    thinking: bool = True
    request_timeout_s: Optional[float] = None  # null: 60 + max_tokens / min_request_tok_s
    min_request_tok_s: float = 5.0  # the slowest rate a working server is allowed per request
    seed: int = 0
    adaptive: bool = False  # add runs until the 95% interval is within target_ci_pct
    target_ci_pct: float = 2.0
    max_runs: int = 20
    lossless_check: int = 4  # prompts compared greedily with the baseline's outputs; 0: off
    lossless_max_tokens: int = 256  # new tokens per lossless-check prompt


@dataclass
class ParamConfig:
    """One searched parameter. `target` is the config key it overrides (default server.<name>)."""

    type: str = MISSING  # int | float | categorical
    low: Optional[float] = None
    high: Optional[float] = None
    step: Optional[float] = None
    log: bool = False
    choices: Optional[List[Any]] = None
    target: Optional[str] = None


@dataclass
class SamplerConfig:
    name: str = "model"  # model (sweep/study/model/sampler.py) | tpe | random
    n_startup_trials: int = 5  # tpe
    explore: float = 0.1  # model: the share of proposals drawn uniformly
    stop: bool = True  # model: end the sweep once no unmeasured configuration can win
    screen: bool = True  # model: the opening measured with one run per level, never an answer
    transfer: bool = True  # model: start from earlier studies with the same drafter and setup


@dataclass
class LoadProfileConfig:
    """The levels a deployment serves, for the load-profile objectives
    (sweep.study.trial.objective)."""

    levels: List[int] = field(default_factory=list)  # empty: every benchmark.concurrency level
    weights: List[float] = field(default_factory=list)  # per level (share of time); empty: equal


@dataclass
class SLOConfig:
    """Latency limits in ms (None: no limit) at `level` (None: every measured level); a trial
    over one is infeasible for Optuna (constraint slo_<metric>_c<level> > 0)."""

    ttft_ms_p50: Optional[float] = None
    ttft_ms_p90: Optional[float] = None
    ttft_ms_p99: Optional[float] = None
    itl_ms_p50: Optional[float] = None
    itl_ms_p90: Optional[float] = None
    itl_ms_p99: Optional[float] = None
    tpot_ms_p50: Optional[float] = None
    tpot_ms_p90: Optional[float] = None
    tpot_ms_p99: Optional[float] = None
    level: Optional[int] = None


@dataclass
class ResolveConfig:
    """The resolve phase after the search (sweep/study/answer/unresolved.py, docs/search.md): while
    the study's verdict is unresolved (the best's paired 95% interval against the baseline includes
    1x, or it is tied with runner-ups), relaunch the contenders and the baseline for more runs."""

    max_rounds: int = 0  # rounds the study may spend in all (a resume spends what is left); 0: off
    runs: int = 3  # more runs on each contender per round, numbered after the recorded ones
    max_contenders: int = 3  # trials relaunched per round: the best and its tied runner-ups


@dataclass
class SearchConfig:
    # The study's name. Unless the command line gives one, `python sweep.py` and `specsweep`
    # derive it from study_prefix and the setup before Hydra composes, so each setup has a study
    # of its own (sweep.config.study_name); a name given is checked against the setup its study
    # recorded. A config composed without them (Hydra's compose API) reads the prefix alone.
    study_name: str = "${search.study_prefix}"
    study_prefix: str = MISSING  # the experiment's part of a derived name
    n_trials: int = 12
    # study: n_trials is the study's total server starts (a resumed sweep runs what is left);
    # sweep: each sweep starts n_trials more (sweep/study/answer/all_sweeps.py counts the
    # spent ones).
    n_trials_scope: str = "study"
    seed: int = 0
    # tok_s | speedup | throughput | tok_s+throughput | weighted_throughput | weighted_speed |
    # per_level_speed (the last three over search.load_profile)
    objective: str = "tok_s"
    throughput_concurrency: int = 64  # the level `throughput` reads (must be benchmarked)
    load_profile: LoadProfileConfig = field(default_factory=LoadProfileConfig)
    slo: SLOConfig = field(default_factory=SLOConfig)
    prune: bool = True  # stop a trial early once it cannot beat the best one
    baseline: bool = True
    baseline_equal_caps: bool = True  # the baseline gets speculation's max_running_requests (48)
    remeasure_baseline: bool = True  # measure the baseline again at the end and report drift
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    # auto | pin | ceiling | sample: how the memory knobs are chosen (sweep/study/search/memory.py);
    # auto: held at a known-feasible value for single-stream objectives, proposed near the OOM
    # boundary when a level above 1 is optimised.
    memory: str = "auto"
    # A budget for the whole study in GPU-hours (server time x model.tp; duplicates and
    # predicted OOMs cost nothing): the sweep runs until it is spent. None: n_trials decides.
    budget_gpu_hours: Optional[float] = None
    space: Dict[str, ParamConfig] = field(default_factory=dict)
    enqueue: List[Dict[str, Any]] = field(default_factory=list)
    # Measured first as well when the objective reads a level above 1
    # (sweep/study/search/priors.py).
    enqueue_under_load: List[Dict[str, Any]] = field(default_factory=list)
    # Without a baseline, the trial every other is compared to run for run
    # (sweep/readout/comparisons.py), named by searched parameters, e.g. {mem_fraction_static: 0.85,
    # hicache_size: 0}.
    reference: Dict[str, Any] = field(default_factory=dict)
    resolve: ResolveConfig = field(default_factory=ResolveConfig)


@dataclass
class TrackingConfig:
    dir: str = "results"
    mlflow_uri: str = "sqlite:///${tracking.dir}/mlflow.db"
    optuna_storage: str = "sqlite:///${tracking.dir}/optuna.db"
    experiment: str = "${search.study_name}"
    # Optuna heartbeats (RDB storages): a trial whose worker stops beating for grace_period
    # seconds is failed by the other workers and retried up to max_retry times. None: off.
    heartbeat_interval: Optional[int] = None
    grace_period: Optional[int] = None
    max_retry: int = 2


@dataclass
class TrialConfig:
    """Set by the sweeper for each job; a plain `python sweep.py` run is one trial named single."""

    name: str = "single"
    number: Optional[int] = None
    role: str = "trial"  # trial | baseline
    # Early stopping, set by the sweeper from the best trial so far: stop after a run once the
    # upper 95% bound of `prune_metric` at `prune_concurrency` is below `prune_below`.
    prune_below: Optional[float] = None
    prune_concurrency: int = 1
    prune_metric: str = "decode_tok_s"
    gpus: Optional[str] = None  # CUDA_VISIBLE_DEVICES of the trial's GPU slot, e.g. "2,3"
    pid_file: Optional[str] = None  # the slot's server record (default: per port, in tracking.dir)
    lossless_reference: Optional[str] = None  # the baseline's lossless.jsonl, set by the sweep
    # A resolve relaunch (sweep.study.answer.unresolved): `runs` more runs numbered from
    # `first_run`, so run r sends the prompts run r of every trial sent; exactly that many (no
    # adaptive runs), no lossless check (the first launch did it). None: benchmark.runs from run 1.
    first_run: int = 1
    runs: Optional[int] = None


@dataclass
class WorkerConfig:
    """How one `python sweep.py -m` process (a worker) uses its node, and how many to start."""

    # Trials run side by side: None means hardware.gpus // model.tp, each on its own GPUs.
    slots: Optional[int] = None
    # Node-local lock files that keep workers on one node off each other's GPUs and ports.
    lock_dir: str = "${oc.env:TMPDIR,/tmp}/specsweep-locks"
    # Jobs the Hydra launcher starts, each one worker (SLURM: one per node). 1: this process.
    count: int = 1


@dataclass
class SpecsweepConfig:
    engine: EngineConfig = MISSING
    model: ModelConfig = MISSING
    drafter: DrafterConfig = MISSING
    hardware: HardwareConfig = MISSING
    server: ServerConfig = MISSING
    benchmark: BenchmarkConfig = MISSING
    search: SearchConfig = MISSING
    tracking: TrackingConfig = MISSING
    trial: TrialConfig = field(default_factory=TrialConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    preflight: bool = True  # check the machine, paths, ports and stores before a sweep starts
    report: bool = True  # write analysis.report at the sweep's close, its figures on the parent run
    # every start-up phase, run and model prediction as a line of its own (else one per trial)
    verbose: bool = False


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(name="specsweep_schema", node=SpecsweepConfig)
