"""Short labels for a configuration, the same on the console, in the summary and in exports.

`steps=3 topk=1 draft=4 mem=0.85 hicache=0` names a trial's searched values; `3/1/4` its
speculation (steps/topk/draft tokens), or `off` without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STEPS, TOPK, DRAFT = (
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
SPECULATION = (STEPS, TOPK, DRAFT)
CONFIG_KEYS = (*SPECULATION, "mem_fraction_static", "hicache_size")
SHORT = {
    STEPS: "steps",
    TOPK: "topk",
    DRAFT: "draft",
    "mem_fraction_static": "mem",
    "hicache_size": "hicache",
}


def describe(values: Mapping[str, Any]) -> str:
    """`steps=3 topk=1 ...` for the keys given (an unknown key keeps its own name)."""
    return " ".join(f"{SHORT.get(k, k)}={v}" for k, v in values.items())


def config_text(params: Mapping[str, Any]) -> str:
    """The five searched values of a trial, `None` where it has none; a trial that does not
    speculate says so once instead of `steps=None topk=None draft=None`."""
    values = {k: params.get(k) for k in CONFIG_KEYS}
    if all(values.get(k) is None for k in SPECULATION):
        rest = {k: v for k, v in values.items() if k not in SPECULATION}
        return " ".join(["speculation off", describe(rest)]).strip()
    return describe(values)


def speculation(params: Mapping[str, Any], missing: Any = "?") -> str:
    """`3/1/4`: steps/topk/draft tokens."""
    return "/".join(str(params.get(k, missing)) for k in SPECULATION)
