"""SGLang's flag surfaces per version: flag names, accepted values, endpoints, log and flush texts.

specsweep speaks two SGLang surfaces (shared/reference/sglang.md §0): the current one
(`CURRENT`, the newest release read) and the 0.5.1 era (0.5.1.post3), whose flag names, endpoints
and formats differ. Everything that depends on which one a server speaks reads it here: the
command builder and the pre-launch flag checks (`harness.server.command`, `harness.server.flags`),
the clients (`/server_info`), the simulator (`harness.sim`, which reproduces both), the sweep's
candidate and space rules, and `python -m sweep.compat`.

The simulator also reproduces many small format differences of the older surface (log
punctuation, metric names, the shape of /server_info); those live in `harness/sim` and branch on
`Surface.legacy`. What the harness reads too is a field here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.sglang.speculative import EAGLE_FAMILY

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
# What specsweep takes from the releases above and applies, unchecked, to any other release of
# the same flag surface: a version outside RELEASES_READ still gets the surface its parser speaks
# (harness.server.flags), but these were read in those releases' source only. Preflight names
# them (sweep/preflight/machine.py check_engine), provenance records `verified: false`, and the
# first ready server is checked against what the harness parses (harness.measure.surface_check).
ASSUMED_FOR_UNREAD = (
    "the memory formula (KV pool from --mem-fraction-static, the CUDA-graph and draft reserves: "
    "the OOM predictions and the simulator's pool)",
    "the log lines parsed (the ready line, max_total_num_tokens=, KV Cache is allocated, "
    "Decode batch, retraction and OOM texts)",
    "the /metrics names read (sglang:generation_tokens_total, sglang:spec_verify_calls_total, "
    "sglang:max_total_num_tokens, ...)",
    "the adaptive speculation policy and its config file's schema",
    "the flush (/flush_cache?timeout= waits for an idle scheduler)",
)


def release_read(version: str | None) -> bool:
    """Is `version` (as installed or as /server_info reports it) a release whose source was
    read? Exact: "0.5.23.post1" or "0.5.24" is not, even though it speaks a known surface."""
    return version in RELEASES_READ


# Flags some release of a surface lacks -> the flag every release of both surfaces takes.
PORTABLE_FLAGS = {"--enable-hicache": "--enable-hierarchical-cache"}

# The log line after which a server has passed its warm-up request (both surfaces, §4).
READY_LINE = "The server is fired up and ready to roll!"

# /flush_cache (reference: docs/sglang-surface.md "A flush that is known to have happened"). SGLang
# flushes only when the scheduler is fully idle (0.5.23 managers/scheduler.py `is_fully_idle`:
# no running or waiting request, `last_batch` empty and, with the overlap scheduler, an empty
# `result_queue`), else answers 400. 0.5.22 and 0.5.23 take `?timeout=SECONDS`
# (entrypoints/http_server.py::flush_cache, managers/scheduler_components/flush_wrapper.py): the
# flush waits up to that long for idle, then fails with FLUSH_TIMED_OUT. 0.5.1.post3 has no such
# parameter (FastAPI ignores an unknown query parameter: it answers at once) and answers a
# refusal with the success text and status 400.
FLUSH_TIMEOUT_PARAM = "timeout"
FLUSH_TIMED_OUT = "Timed out waiting for idle state."


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
