"""SGLang's command line as the simulator accepts it, and SGLang's automatic adjustments.

The parser mirrors SGLang's argparse surface for the flags a launch uses (shared/reference/
sglang.md §1a, §1b), built from the version's facts in `harness.sglang`: the same names,
aliases and `allow_abbrev=True`, so an unknown flag fails with "unrecognized arguments" and the
removed `--cuda-graph-max-bs` fails as an ambiguous prefix, both with exit status 2. `resolve`
applies the adjustments of §2 with SGLang's warning texts.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from typing import Any

from harness.sglang import attention, graphs, memory
from harness.sglang.speculative import (
    EAGLE_FAMILY,
    SPEC_MAX_RUNNING_REQUESTS,
    TOPK_BACKEND_REFUSAL,
    TOPK_ONE_ONLY_BACKENDS,
    canonical_algorithm,
    captured_graph_max_bs,
    forced_draft_tokens,
)
from harness.sglang.surfaces import CURRENT, VERSIONS, Surface, surface
from harness.sim import cpu_device
from harness.sim.fraction_default import fraction_default
from harness.sim.intake import REASONING
from harness.sim.model.adaptive_args import resolve_adaptive
from harness.sim.model.profiles import DRAFTERS, HARDWARE, TARGETS

log = logging.getLogger("sglang.srt.arg_groups")

# The built-in algorithms the simulator models; SGLang's others (DFLASH, ...) it refuses as unknown.
SPEC_ALGORITHMS = (*EAGLE_FAMILY, "NGRAM")
# Without speculation SGLang sizes the request pool from memory; the simulator takes this.
PLAIN_MAX_RUNNING_REQUESTS = 2048


class _DeprecatedStoreTrue(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        log.warning(
            "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
            "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead."
        )
        setattr(namespace, self.dest, True)


def sglang_version_of(argv: list[str] | None) -> str:
    """The surface to speak, read before the real parser is built (its flags depend on it)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--sim-sglang-version", choices=VERSIONS, default=CURRENT)
    return pre.parse_known_args(argv)[0].sim_sglang_version


def build_parser(version: str = CURRENT) -> argparse.ArgumentParser:
    """SGLang's parser for `version`: the current one (sglang serve) or 0.5.1.post3's
    (launch_server), plus the simulator's own --sim-* flags."""
    facts = surface(version)
    p = argparse.ArgumentParser(prog=facts.prog)
    a = p.add_argument
    a("--model-path", "--model", dest="model_path", required=True)
    a("--tokenizer-path")
    a("--trust-remote-code", action="store_true")
    a("--served-model-name")
    a("--context-length", type=int)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--dp-size", type=int, default=1)
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--api-key")
    a("--device", default="cuda")
    a("--random-seed", type=int)
    a("--mem-fraction-static", type=float)
    a("--max-running-requests", type=int)
    a("--max-total-tokens", type=int)
    a("--chunked-prefill-size", type=int)
    a("--page-size", type=int, default=1)
    a("--kv-cache-dtype", default="auto")
    a("--attention-backend")
    a("--stream-interval", type=int, default=1)
    a("--disable-overlap-schedule", action="store_true")
    a("--num-continuous-decode-steps", type=int, default=1)  # no consumer in SGLang either
    hicache = [f for f in ("--enable-hierarchical-cache", "--enable-hicache") if facts.has(f)]
    a(*hicache, dest="enable_hierarchical_cache", action="store_true")
    a("--hicache-ratio", type=float, default=facts.hicache_ratio_default)
    a("--hicache-size", type=int, default=0)
    if not facts.per_phase_cuda_graph:
        a("--cuda-graph-max-bs", dest="cuda_graph_max_bs_decode", type=int)
        a("--cuda-graph-bs", dest="cuda_graph_bs_decode", type=int, nargs="+")
        a("--disable-cuda-graph", action="store_true")
    else:
        a("--cuda-graph-max-bs-decode", type=int)
        a("--cuda-graph-max-bs-prefill", type=int)
        a("--cuda-graph-bs-decode", type=int, nargs="+")
        a("--cuda-graph-bs-prefill", type=int, nargs="+")
        a("--cuda-graph-backend-decode", choices=["full", "breakable", "disabled"], default="full")
        a("--language-model-only", action="store_true")
        a("--cuda-graph-backend-prefill", choices=["full", "breakable", "disabled"], default="full")
        a("--disable-cuda-graph", action=_DeprecatedStoreTrue)
    a("--disable-custom-all-reduce", action="store_true")
    if facts.algorithm_choices_at_parse:
        a("--speculative-algorithm", choices=list(facts.speculative_algorithms))
    else:
        a("--speculative-algorithm")  # no choices at parse time: validated later
    a(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
    )
    if facts.has("--speculative-draft-model-revision"):
        a("--speculative-draft-model-revision")
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)
    a("--speculative-token-map")
    if facts.adaptive_speculation:
        a("--speculative-adaptive", action="store_true")
        a("--speculative-adaptive-config")
    a("--reasoning-parser", choices=list(facts.reasoning_parsers))
    a("--tool-call-parser")
    a("--enable-metrics", action="store_true")
    a("--log-level", default="info")
    a("--decode-log-interval", type=int, default=40)
    a("--sleep-on-idle", action="store_true")  # SGLang spins idle without it; the simulator never
    sim = p.add_argument_group("simulator (not SGLang flags)")
    sim.add_argument(
        "--sim-sglang-version",
        choices=VERSIONS,
        default=CURRENT,
        help="whose flags, adjustments, endpoints, log lines and metrics to speak",
    )
    sim.add_argument(
        "--sim-clock-scale", type=float, default=1.0, help="simulated seconds per wall second"
    )
    sim.add_argument("--sim-hardware", choices=sorted(HARDWARE), default="rtx_pro_6000_pcie")
    sim.add_argument("--sim-target", choices=sorted(TARGETS), default="kimi_k25")
    sim.add_argument(
        "--sim-drafter",
        choices=sorted(DRAFTERS),
        help="drafter profile; default: matched from the draft model path",
    )
    sim.add_argument("--sim-seed", type=int, default=0)
    sim.add_argument(
        "--sim-drift",
        type=float,
        default=0.02,
        help="spread of the simulated machine's slowly wandering speed (0: steady)",
    )
    sim.add_argument(
        "--sim-accept-decay",
        type=_decay,
        default=0.0,
        metavar="X",
        help="acceptance decay with output position: each draft's acceptance falls by the "
        "fraction X (0 <= X < 1) per 1000 output tokens (0: only the drafter's own fade)",
    )
    sim.add_argument(
        "--sim-reasoning-tokens",
        type=_reasoning,
        default=REASONING,
        metavar="MEDIAN[:SIGMA]",
        help="the simulated model's reasoning length: lognormal median (and sigma) of its "
        "thinking tokens (default 1200:0.5; e.g. 6500:0.25 for 4-10k-token data generation)",
    )
    sim.add_argument(
        "--sim-load-s",
        type=float,
        help="simulated start-up seconds (default: the target profile's load time)",
    )
    sim.add_argument(
        "--sim-fault",
        action="append",
        metavar="KIND[=VALUE]",
        help="inject a fault (repeatable): crash-after-tokens=N, hang-at-startup, slow-start=S, "
        "stall-request=N, refuse-connections, refuse-connections-after=N, lossy-after-tokens=N, "
        "... (harness/sim/faults.py)",
    )
    return p


def _reasoning(text: str) -> tuple[float, float]:
    median, _, sigma = text.partition(":")
    try:
        value = (float(median), float(sigma) if sigma else REASONING[1])
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not MEDIAN[:SIGMA]") from e
    if value[0] < 1 or not 0 <= value[1] <= 3:
        raise argparse.ArgumentTypeError(f"{text!r}: median >= 1, 0 <= sigma <= 3")
    return value


def _decay(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not in [0, 1)")
    return value


@dataclass
class Resolved:
    """Effective server arguments after SGLang's adjustments (what /server_info reports)."""

    args: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)  # INFO lines, logged before the warnings
    worker_infos: list[str] = field(default_factory=list)  # a TP worker's, before the weights


def _speculative_params(
    args: dict[str, Any], architecture: str, algo: str, facts: Surface, warn
) -> None:
    """Both versions: all three unset -> per-architecture defaults, a partial set -> a bare
    AssertionError, topk 1 -> draft tokens forced to steps + 1 (with SGLang's warning)."""
    if args["speculative_num_steps"] is None:
        assert args["speculative_eagle_topk"] is None
        assert args["speculative_num_draft_tokens"] is None
        steps, topk, draft = facts.default_speculative_params(architecture, algo)
        args["speculative_num_steps"] = steps
        args["speculative_eagle_topk"] = topk
        args["speculative_num_draft_tokens"] = draft
    if args["attention_backend"] in TOPK_ONE_ONLY_BACKENDS and args["speculative_eagle_topk"] > 1:
        raise ValueError(TOPK_BACKEND_REFUSAL)
    forced = forced_draft_tokens(args["speculative_num_steps"], args["speculative_eagle_topk"])
    if forced is not None and args["speculative_num_draft_tokens"] != forced:
        warn(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1"
        )
        args["speculative_num_draft_tokens"] = forced


def _reset_max_running(args: dict[str, Any], facts: Surface, warn) -> None:
    """Speculation with max_running_requests unset: SGLang's reset (silent in 0.5.1)."""
    if args["max_running_requests"] is not None:
        return
    args["max_running_requests"] = SPEC_MAX_RUNNING_REQUESTS
    if facts.warns_max_running_reset:
        warn(
            f"Max running requests is reset to {SPEC_MAX_RUNNING_REQUESTS} for speculative "
            "decoding. You can override this by explicitly setting --max-running-requests."
        )


def resolve(
    ns: argparse.Namespace, architecture: str, gpu_mib: float, compute: str | None = None
) -> Resolved:
    """Apply SGLang's automatic adjustments. Raises AssertionError/ValueError as SGLang does.
    `compute`: the GPU's architecture (sm90, sm120), which the default attention backend depends
    on; None (the in-process oracle, which serves nothing) leaves the backend as given."""
    facts = surface(getattr(ns, "sim_sglang_version", CURRENT))
    if facts.legacy:
        return _resolve_0_5_1(ns, architecture, gpu_mib, facts, compute)
    args = dict(vars(ns))
    out = Resolved(args)

    def warn(message: str) -> None:
        out.warnings.append(message)

    backend = attention.resolved_default(args, architecture, compute)
    if cpu_device.on_cpu(args):  # SGLang's CPU engine picks its own
        cpu_device.resolve_backends(args, warn)
    elif backend is not None:  # before the speculative settings: topk as given
        args["attention_backend"] = backend
        out.infos.append(attention.default_line(backend))

    # 0.5.23 reports the flag as given and the resolved batch under cuda_graph_config (sim.info)
    args["sim_requested_graph_max_bs"] = args["cuda_graph_max_bs_decode"]
    given_max_running = args["max_running_requests"]
    if args["language_model_only"] and not memory.architecture(architecture).language_model_only:
        raise ValueError(memory.language_model_only_refusal(architecture))
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = 8192
    graph_off = args["disable_cuda_graph"] or args["cuda_graph_backend_decode"] == "disabled"
    args["cuda_graph_enabled"] = not graph_off
    if args["cuda_graph_max_bs_decode"] is None:
        args["cuda_graph_max_bs_decode"] = graphs.default_decode_max_bs(gpu_mib, args["tp_size"])

    algo = args["speculative_algorithm"]
    if algo is not None:
        if algo.upper() not in SPEC_ALGORITHMS:
            raise ValueError(f"Unknown speculative algorithm name: {algo.upper()}")
        algo = args["speculative_algorithm"] = canonical_algorithm(algo)
        if (
            args["speculative_draft_model_path"]
            and args["speculative_draft_model_revision"] is None
        ):
            args["speculative_draft_model_revision"] = "main"
        _reset_max_running(args, facts, warn)
        if args["disable_overlap_schedule"]:
            warn(
                "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone "
                "speculative decoding."
            )
        resolve_adaptive(args, warn)  # before the EAGLE handler, as speculative_hook.py:261
        _speculative_params(args, architecture, algo, facts, warn)
        if args["speculative_token_map"] and algo == "EAGLE3":
            warn(
                "Speculative token map specified, but EAGLE3 models already have this. "
                "Ignoring the specified token map."
            )
    elif args["max_running_requests"] is None:  # the scheduler sizes it; the args keep None
        args["max_running_requests"] = PLAIN_MAX_RUNNING_REQUESTS
        args["sim_sized_max_running"] = True

    if args["mem_fraction_static"] is None:
        args["mem_fraction_static"] = fraction_default(
            args, given_max_running, architecture, gpu_mib
        )
    if args["enable_hierarchical_cache"] and args["hicache_ratio"] is None:
        args["hicache_ratio"] = 2.0
    if cpu_device.on_cpu(args):
        cpu_device.resolve_graphs(args, warn)
    # the decode graphs the runner captures (harness.sglang.graphs): the listed sizes up to the
    # max_bs the memory hook resolved, or --cuda-graph-bs, then what the request pool can fill
    args["sim_graph_bs"] = graphs.decode_batch_sizes(
        args["cuda_graph_max_bs_decode"],
        algo is not None,
        args["max_running_requests"],
        given=args["cuda_graph_bs_decode"],
    )
    args["cuda_graph_max_bs_decode"] = captured_graph_max_bs(
        args["cuda_graph_max_bs_decode"], args["max_running_requests"]
    )
    return out


def _resolve_0_5_1(
    ns: argparse.Namespace, architecture: str, gpu_mib: float, facts: Surface, compute: str | None
) -> Resolved:
    """0.5.1.post3's __post_init__ (reference/sglang.md §2b): EAGLE forces overlap off. Its TP
    workers choose the attention backend (topk resolved) and only log it."""
    args = dict(vars(ns))
    out = Resolved(args)
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = 8192
    args["cuda_graph_enabled"] = not args["disable_cuda_graph"]
    if args["cuda_graph_max_bs_decode"] is None:
        args["cuda_graph_max_bs_decode"] = 256 if args["tp_size"] < 4 else 512
    algo = args["speculative_algorithm"]
    if algo is not None:  # the parser took only EAGLE, EAGLE3 or NEXTN
        algo = args["speculative_algorithm"] = canonical_algorithm(algo)
        _reset_max_running(args, facts, out.warnings.append)
        if facts.eagle_forces_overlap_off:
            args["disable_overlap_schedule"] = True
            out.warnings.append(
                "Overlap scheduler is disabled because of using eagle speculative decoding."
            )
        _speculative_params(args, architecture, algo, facts, out.warnings.append)
    elif args["max_running_requests"] is None:
        args["max_running_requests"] = PLAIN_MAX_RUNNING_REQUESTS
    if args["mem_fraction_static"] is None:
        args["mem_fraction_static"] = memory.auto_mem_fraction_0_5_1(
            gpu_mib, args["tp_size"], algo is not None
        )
    args["cuda_graph_max_bs_decode"] = captured_graph_max_bs(
        args["cuda_graph_max_bs_decode"], args["max_running_requests"]
    )
    backend = attention.resolved_default(args, architecture, compute, legacy=True)
    if backend is not None:
        out.worker_infos.append(attention.default_line(backend, legacy=True))
    return out


# 0.5.1 names for what the simulator keeps under the current surface's names internally.
_LEGACY_NAMES = {
    "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
    "cuda_graph_bs_decode": "cuda_graph_bs",
}


def reported_args(args: dict[str, Any], version: str) -> dict[str, Any]:
    """Effective server args under the names `version`'s server_info uses (no --sim-* flags)."""
    out = {k: v for k, v in args.items() if not k.startswith("sim_") and k != "cuda_graph_enabled"}
    if surface(version).legacy:
        return {_LEGACY_NAMES.get(k, k): v for k, v in out.items()}
    if args.get("sim_sized_max_running"):  # 0.5.23: internal_states has the scheduler's
        out["max_running_requests"] = None
    return out
