"""SGLang's adaptive speculative decoding (0.5.22, 0.5.23: srt/speculative/adaptive_spec_params.py).

The built-in step policy and the schema of an `--speculative-adaptive-config` file, as SGLang
reads them: what the command, the checks, the simulator and the file writer all follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from harness.sglang.speculative import canonical_algorithm

# SGLang's built-in config (DEFAULT_ADAPTIVE_CONFIG, 0.5.23 adaptive_spec_params.py:28-53): slots
# keyed by batch-size thresholds; `candidate_steps` 0 turns drafting off at that batch size.
_HOLD = {"up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}
ADAPTIVE_DEFAULT_CONFIG: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "1": {"candidate_steps": [1, 3, 5, 7], **_HOLD, "down_hysteresis": -0.25},
        "8": {"candidate_steps": [0, 1, 3], **_HOLD},
        "32": {"candidate_steps": [0, 1], **_HOLD},
        "64": {"candidate_steps": [0], **_HOLD},
    }
)
# AdaptiveStepSlot's knobs when a slot (or the file's top level) leaves them out
# (0.5.23 adaptive_spec_params.py:171-176).
ADAPTIVE_KNOB_DEFAULTS: Mapping[str, float] = MappingProxyType(
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
