"""SGLang's facts per version: flags, accepted values, endpoints and speculative rules.

specsweep speaks two SGLang surfaces (shared/reference/sglang.md §0): the current one
(`CURRENT`, the newest release read) and the 0.5.1 era (0.5.1.post3), whose flag names, endpoints
and formats differ. Everything that depends on which one a server speaks reads it here: the
command builder and the pre-launch flag checks (`harness.command`, `harness.flags`), the clients
(`/server_info`), the simulator (`harness.sim`, which reproduces both), the sweep's candidate and
space rules, and `python -m sweep.compat`. A leaf module: it imports nothing of the project, so
the harness and the simulator can both read it without reading each other.

The simulator also reproduces many small format differences of the older surface (log
punctuation, metric names, the shape of /server_info); those live in `harness/sim` and branch on
`Surface.legacy`. What the harness reads too is a field here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType

CURRENT = "0.5.23"  # the surface spoken unless told otherwise; the only place this literal lives
LEGACY = "0.5.1"
VERSIONS = (CURRENT, LEGACY)

# The releases read, and the surface each one's parser speaks (`ServerArgs.add_cli_args`, run on
# the unpacked wheels): 0.5.22's 546 flags and 0.5.23's 561 differ in flags specsweep never
# builds (0.5.22 lacks the `--enable-hicache` alias and 15 feature flags, 0.5.23 dropped
# `--speculative-skip-dp-mlp-sync`), and their decode lines, /server_info and graph config are
# the same code. Which surface an installed SGLang speaks is read from its own parser
# (`surface_of_flags`); this table is the fallback when only its version can be read.
RELEASES_READ = {"0.5.1.post3": LEGACY, "0.5.22": CURRENT, "0.5.23": CURRENT}
# Flags some release of a surface lacks -> the flag every release of both surfaces takes.
PORTABLE_FLAGS = {"--enable-hicache": "--enable-hierarchical-cache"}

# The log line after which a server has passed its warm-up request (both surfaces, §4).
READY_LINE = "The server is fired up and ready to roll!"

# A start-up refusal, raised while SGLang resolves its arguments (a ValueError: a traceback on
# stderr, exit code 1), right after the automatic (steps, topk, draft) choice. The same text in
# 0.5.1.post3 (srt/server_args.py __post_init__), 0.5.22 and 0.5.23
# (srt/arg_groups/speculative_hook.py `_handle_eagle_family`): a deterministic crash for a region
# of the search space (every topk > 1 with this backend).
TOPK_ONE_ONLY_BACKENDS = ("trtllm_mha",)
TOPK_BACKEND_REFUSAL = "trtllm_mha backend only supports topk = 1 for speculative decoding."

# /flush_cache (reference: docs/reliability.md "A flush that is known to have happened"). SGLang
# flushes only when the scheduler is fully idle (0.5.23 managers/scheduler.py `is_fully_idle`:
# no running or waiting request, `last_batch` empty and, with the overlap scheduler, an empty
# `result_queue`), else answers 400. 0.5.22 and 0.5.23 take `?timeout=SECONDS`
# (entrypoints/http_server.py::flush_cache, managers/scheduler_components/flush_wrapper.py): the
# flush waits up to that long for idle, then fails with FLUSH_TIMED_OUT. 0.5.1.post3 has no such
# parameter (FastAPI ignores an unknown query parameter: it answers at once) and answers a
# refusal with the success text and status 400.
FLUSH_TIMEOUT_PARAM = "timeout"
FLUSH_TIMED_OUT = "Timed out waiting for idle state."
FLUSH_FAILED = "Flush cache failed.\n"  # 0.5.22+, a refusal without a message

# The speculative algorithms of the EAGLE family (§2a `_handle_eagle_family`); NEXTN is an alias.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
# SGLang resets an unset max_running_requests to this when speculation is on (both surfaces).
SPEC_MAX_RUNNING_REQUESTS = 48


@dataclass(frozen=True, eq=False)  # one instance per version, compared (and hashed) by identity
class Surface:
    """One SGLang version's command line, HTTP surface and start-up adjustments."""

    version: str  # the surface's name: CURRENT or LEGACY
    release: str  # the release read for it: what /server_info's "version" says
    prog: str  # argparse's prog, as SGLang's own parser prints it in errors
    # Flags that do not exist in this surface -> what to use there instead (None: nothing).
    absent: Mapping[str, str | None]
    # ServerSpec fields whose flag is not the mechanical --field-name.
    flag_names: Mapping[str, str]
    # Built-in speculative algorithms; whether argparse refuses others (else start-up does).
    speculative_algorithms: tuple[str, ...]
    algorithm_choices_at_parse: bool
    # --reasoning-parser names; `reasoning_parsers_complete`: the whole list (else a subset).
    reasoning_parsers: tuple[str, ...]
    reasoning_parsers_complete: bool
    server_info_path: str  # effective args + internal state
    model_info_path: str
    deprecated_server_info_path: str | None  # still served, with a deprecation warning
    hicache_ratio_default: float | None  # at parse time (None: resolved at start-up)
    warns_max_running_reset: bool  # the reset to SPEC_MAX_RUNNING_REQUESTS is logged
    eagle_forces_overlap_off: bool  # EAGLE disables the overlap scheduler
    # _auto_choose_speculative_params: (num_steps, topk, draft_tokens) by target architecture.
    auto_speculative_params: Mapping[str, tuple[int, int, int]]
    auto_speculative_fallback: tuple[int, int, int]
    legacy: bool  # the 0.5.1-era formats (logs, metrics, per-request fields)
    flush_waits_for_idle: bool = True  # /flush_cache?timeout= waits for idle (FLUSH_TIMEOUT_PARAM)
    # A flag only this surface's parser has: what tells an installed SGLang's surface apart.
    marker_flag: str = ""
    # --speculative-adaptive / --speculative-adaptive-config exist (0.5.22 and 0.5.23:
    # srt/arg_groups/fields/spec.py; 0.5.1.post3 has neither).
    adaptive_speculation: bool = True

    def has(self, flag: str) -> bool:
        """False for a flag known not to exist in this surface."""
        return flag not in self.absent

    @property
    def per_phase_cuda_graph(self) -> bool:
        """CUDA graphs are disabled per phase (--cuda-graph-backend-{decode,prefill}=disabled);
        otherwise with --disable-cuda-graph (deprecated by the current surface, still accepted)."""
        return self.has("--cuda-graph-backend-decode")

    @property
    def choices(self) -> dict[str, tuple[str, ...]]:
        """Flag -> the values this surface's parser or its start-up validation accepts, for the
        flags whose whole list is known."""
        out = {"--speculative-algorithm": self.speculative_algorithms}
        if self.reasoning_parsers_complete:
            out["--reasoning-parser"] = self.reasoning_parsers
        return out

    def flag_for(self, field: str) -> str:
        """The flag a ServerSpec field becomes (`tp_size` -> `--tp-size`)."""
        return self.flag_names.get(field, "--" + field.replace("_", "-"))

    def default_speculative_params(self, architecture: str, algorithm: str) -> tuple[int, int, int]:
        """(num_steps, topk, draft_tokens) when none of the three is given."""
        if algorithm == "STANDALONE":
            return 3, 1, 4
        return self.auto_speculative_params.get(architecture, self.auto_speculative_fallback)


def _frozen(mapping: dict) -> Mapping:
    return MappingProxyType(mapping)


_REASONING_PARSERS_0_5_1 = (
    "deepseek-r1",
    "deepseek-v3",
    "glm45",
    "gpt-oss",
    "kimi",
    "qwen3",
    "qwen3-thinking",
    "step3",
)

_SURFACES = {
    CURRENT: Surface(
        version=CURRENT,
        release=CURRENT,
        prog="sglang serve",
        absent=_frozen(
            {
                "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
                "--cuda-graph-bs": "--cuda-graph-bs-decode",
            }
        ),
        flag_names=_frozen({"cuda_graph_max_bs": "--cuda-graph-max-bs-decode"}),
        speculative_algorithms=(
            *EAGLE_FAMILY,
            "NGRAM",
            "DFLASH",
            "DSPARK",
            "UNO",
        ),
        algorithm_choices_at_parse=False,  # "Unknown speculative algorithm name" at start-up
        # ["auto"] + REASONING_PARSER_NAMES is longer; these are the names specsweep uses.
        reasoning_parsers=(
            "auto",
            "deepseek-r1",
            "deepseek-v3",
            "glm45",
            "gpt-oss",
            "kimi",
            "kimi_k2",
            "minimax",
            "qwen3",
            "qwen3-thinking",
            "step3",
        ),
        reasoning_parsers_complete=False,
        server_info_path="/server_info",
        model_info_path="/model_info",
        deprecated_server_info_path="/get_server_info",
        hicache_ratio_default=None,  # 2.0 in cache mode, resolved at start-up
        warns_max_running_reset=True,
        eagle_forces_overlap_off=False,
        auto_speculative_params=_frozen(
            {
                "LlamaForCausalLM": (5, 4, 8),
                "Grok1ForCausalLM": (5, 4, 8),
                "Grok1VForCausalLM": (5, 4, 8),
            }
        ),
        auto_speculative_fallback=(3, 1, 4),
        legacy=False,
        marker_flag="--cuda-graph-max-bs-decode",
    ),
    LEGACY: Surface(
        version=LEGACY,
        release=LEGACY + ".post3",
        prog="launch_server.py",
        absent=_frozen(
            {
                "--cuda-graph-max-bs-decode": "--cuda-graph-max-bs",
                "--cuda-graph-max-bs-prefill": None,
                "--cuda-graph-bs-decode": "--cuda-graph-bs",
                "--cuda-graph-bs-prefill": None,
                "--cuda-graph-backend-decode": "--disable-cuda-graph",
                "--cuda-graph-backend-prefill": "--disable-cuda-graph",
                "--speculative-draft-model-revision": None,
                "--enable-hicache": "--enable-hierarchical-cache",
                "--speculative-adaptive": None,
                "--speculative-adaptive-config": None,
            }
        ),
        flag_names=_frozen({"cuda_graph_max_bs": "--cuda-graph-max-bs"}),
        speculative_algorithms=("EAGLE", "EAGLE3", "NEXTN"),
        algorithm_choices_at_parse=True,
        reasoning_parsers=_REASONING_PARSERS_0_5_1,  # ReasoningParser.DetectorMap
        reasoning_parsers_complete=True,
        server_info_path="/get_server_info",
        model_info_path="/get_model_info",
        deprecated_server_info_path=None,
        hicache_ratio_default=2.0,
        warns_max_running_reset=False,  # silently
        eagle_forces_overlap_off=True,
        auto_speculative_params=_frozen(
            {
                "DeepseekV3ForCausalLM": (3, 1, 4),
                "DeepseekV2ForCausalLM": (3, 1, 4),
                "GptOssForCausalLM": (3, 1, 4),
            }
        ),
        auto_speculative_fallback=(5, 4, 8),
        legacy=True,
        flush_waits_for_idle=False,
        marker_flag="--cuda-graph-max-bs",
        adaptive_speculation=False,
    ),
}

# Where a client finds a server's effective args whatever its surface: the current path first.
SERVER_INFO_PATHS = tuple(
    dict.fromkeys(
        path
        for s in _SURFACES.values()
        for path in (s.server_info_path, s.deprecated_server_info_path)
        if path
    )
)


def surface(version: str = CURRENT) -> Surface:
    """The facts of a surface by name (one of VERSIONS); KeyError names the known ones."""
    try:
        return _SURFACES[version]
    except KeyError:
        known = ", ".join(VERSIONS)
        raise KeyError(f"unknown SGLang surface {version!r}: use one of {known}") from None


def surface_of_flags(options: Collection[str]) -> str | None:
    """The surface whose flags a parser has (its option strings), or None when it has neither
    surface's marker."""
    for facts in _SURFACES.values():  # the current surface first: its marker is the longer
        if facts.marker_flag in options:
            return facts.version
    return None


def replacement_flag(flag: str) -> str | None:
    """What to pass instead of `flag` where a parser lacks it (None: nothing known)."""
    if flag in PORTABLE_FLAGS:
        return PORTABLE_FLAGS[flag]
    return next((s.absent[flag] for s in _SURFACES.values() if s.absent.get(flag)), None)


def canonical_algorithm(name: str | None) -> str | None:
    """The algorithm SGLang runs for `name`: upper-cased, NEXTN -> EAGLE (both surfaces)."""
    if name is None:
        return None
    name = name.upper()
    return "EAGLE" if name == "NEXTN" else name


def forced_draft_tokens(steps: int | None, topk: int | None) -> int | None:
    """The draft-token count SGLang imposes: num_steps + 1 when topk == 1, whatever was asked
    (both surfaces, with a warning); None when it is free."""
    if topk == 1 and steps is not None:
        return steps + 1
    return None


def captured_graph_max_bs(max_bs: int | None, max_running: int | None) -> int | None:
    """The largest CUDA-graph batch SGLang captures: graphs are captured only up to what the
    request pool holds (`req_to_token_pool.size`, about max_running_requests). None: unknown."""
    if max_bs is None or max_running is None:
        return max_bs
    return min(max_bs, max_running)


def draft_tree_capacity(steps: int, topk: int) -> int:
    """The most draft tokens a tree of `steps` levels and `topk` branches holds (SGLang does not
    check it; its bench_speculative.py skips configurations above it)."""
    return topk * steps + 1


# -- Adaptive speculative decoding (0.5.22, 0.5.23: srt/speculative/adaptive_spec_params.py) ------
# SGLang's built-in config (DEFAULT_ADAPTIVE_CONFIG, 0.5.23 adaptive_spec_params.py:28-53): slots
# keyed by batch-size thresholds; `candidate_steps` 0 turns drafting off at that batch size.
_HOLD = {"up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}
ADAPTIVE_DEFAULT_CONFIG: Mapping[str, Mapping[str, object]] = _frozen(
    {
        "1": {"candidate_steps": [1, 3, 5, 7], **_HOLD, "down_hysteresis": -0.25},
        "8": {"candidate_steps": [0, 1, 3], **_HOLD},
        "32": {"candidate_steps": [0, 1], **_HOLD},
        "64": {"candidate_steps": [0], **_HOLD},
    }
)
# AdaptiveStepSlot's knobs when a slot (or the file's top level) leaves them out
# (0.5.23 adaptive_spec_params.py:171-176).
ADAPTIVE_KNOB_DEFAULTS: Mapping[str, float] = _frozen(
    {
        "ema_alpha": 0.2,
        "update_interval": 5,
        "warmup_batches": 10,
        **_HOLD,
        "down_hysteresis": -0.25,
    }
)
# adaptive_unsupported_reason (0.5.23 adaptive_spec_params.py:56-100): SGLang does not refuse
# these, it logs "speculative_adaptive disabled: <reason>. Falling back to static speculative
# params." (arg_groups/speculative_hook.py:1374-1389) and serves static: a trial labelled
# adaptive would measure something else, so specsweep refuses them before a launch.
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")  # after the NEXTN -> EAGLE alias
ADAPTIVE_DISABLED = (
    "speculative_adaptive disabled: {reason}. Falling back to static speculative params."
)


def adaptive_unsupported_reason(algorithm: str | None, topk: int | None) -> str | None:
    """SGLang's reason text for the two conditions a specsweep launch can reach (algorithm,
    topk); the others (attention DP, multi-layer EAGLE, two-batch overlap, PD-mux) are flags
    specsweep never builds."""
    algo = canonical_algorithm(algorithm)
    if algo not in ADAPTIVE_ALGORITHMS:
        return f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    return None


def adaptive_slots(config: Mapping[str, object]) -> dict[int, dict]:
    """The batch-size slots of an adaptive config, validated as SGLang's `_load_adaptive_config`
    does (0.5.23 adaptive_spec_params.py:103-139; same texts): ValueError otherwise."""
    slots: dict[int, dict] = {}
    for key, entry in config.items():
        if not key.isdigit():
            continue  # knobs shared by every slot (and anything else) live beside the slots
        steps = entry.get("candidate_steps") if isinstance(entry, Mapping) else None
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
        ):
            raise ValueError(
                f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}"
            )
        slots[int(key)] = {**config, **entry}  # AdaptiveSpeculativeParams: {**cfg, **entry}
    if not slots:
        raise ValueError(
            "speculative_adaptive_config must contain at least one integer-string "
            'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
            f"Got keys: {list(config.keys())}"
        )
    return slots


def adaptive_candidate_steps(config: Mapping[str, object]) -> list[int]:
    """Every slot's candidate steps (resolve_candidate_steps_from_config): what
    --speculative-num-steps must be one of, and each gets its runtime state (CUDA graphs)."""
    return sorted({s for slot in adaptive_slots(config).values() for s in slot["candidate_steps"]})


def adaptive_initial_steps(config: Mapping[str, object], requested: int | None) -> int:
    """`_init_adaptive_speculative_params` (speculative_hook.py:1392-1427): an unset
    --speculative-num-steps becomes the middle candidate; a given one must be a candidate."""
    candidates = adaptive_candidate_steps(config)
    if requested is None:
        return candidates[len(candidates) // 2]
    if requested not in candidates:
        raise ValueError(
            f"--speculative-num-steps={requested} is not in the adaptive config candidate_steps "
            f"{candidates}. Pass one of those values."
        )
    return requested
