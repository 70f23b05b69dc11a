"""The setup: what a measurement depends on besides the searched values (the engine and the
software it runs on, the model, the drafter, the hardware, the benchmark, the fixed server knobs,
the prompts' content, the sampling), as a flat record a person can read (`setup`, dotted keys)
and as a short hash (`setup_key`).

One study, one setup (sweep.tracking.identity): its name is derived from the setup
(sweep.config.study_name) and a later sweep whose setup differs is refused, naming each key.
Within a study the baseline is stored under the key of its own setup (the drafter left out: a
baseline runs none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.server.redact import (
    REDACTED,
    is_secret_name,
    redact_url_passwords,
    redacted_argv,
)
from harness.workload import load_prompts
from harness.workload.record import digest as prompts_digest
from sweep.config.specs import SEARCHED
from sweep.config.workload import sampling_choice, workload_choice

# Settings that decide how long the harness waits, what it checks or where it listens, never what
# a run measures: raising a timeout the console names continues the study instead of starting one.
OPERATIONAL = {
    "engine": ("ready_timeout_s", "stall_timeout_s", "stop_grace_s", "gpu_release_timeout_s"),
    "server": ("host", "port", "api_key_env"),
    "benchmark": (
        "request_timeout_s",
        "min_request_tok_s",
        "lossless_check",
        "lossless_max_tokens",
    ),
    "model": ("host_ram_gb",),  # preflight's arithmetic, not the server's
    "hardware": ("host_ram_gb",),
}
GROUPS = ("engine", "model", "hardware", "benchmark", "server")


def setup(
    cfg: DictConfig,
    software: Mapping[str, Any] | None = None,
    *,
    drafter: bool = False,
    pinned: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The setup as dotted keys (`hardware.name`, `benchmark.runs`, `software.sglang`, ...).

    `software` is what the engine runs on (`sweep.tracking.provenance.software`: SGLang, torch,
    driver and CUDA versions, or the simulator's), read once per sweep: after an upgrade nothing
    measured before is reused. `drafter`: the drafter group too (a study's trials run it; its
    baseline does not). `pinned`: searched knobs the user fixed on the command line, held for
    every server of the study (sweep.config.study_name.pinned_values)."""
    parts: dict[str, Any] = {}
    for group in (*GROUPS, *(("drafter",) if drafter else ())):
        values = OmegaConf.to_container(cfg[group], resolve=True)
        assert isinstance(values, dict)
        skip = set(OPERATIONAL.get(group, ()))
        if group == "server":
            skip |= set(SEARCHED)  # the searched values are the trial's, not the setup's
        parts[group] = {k: v for k, v in values.items() if k not in skip}
    if software is not None:
        parts["software"] = dict(software)
    if pinned:
        parts["pinned"] = dict(pinned)
    # What the config names only by reference: the prompts' content (a user's file edited in
    # place) and the sampling a local generation_config.json supplies.
    _, source, categories = workload_choice(cfg)
    parts["prompts"] = {"digest": prompts_digest(load_prompts(source, 0, categories))}
    parts["sampling"] = sampling_choice(cfg)
    if not OmegaConf.select(cfg, "search.baseline_equal_caps", default=True):
        parts["search"] = {"baseline_equal_caps": False}  # an uncapped baseline is another one
    return {key: _without_secrets(key, value) for key, value in flatten(parts).items()}


def _without_secrets(key: str, value: Any) -> Any:
    """A secret never enters the setup, which is stored and printed: a secret-named variable
    (hardware.env.HF_TOKEN) reads <redacted> (a new token is the same setup), a URL's password
    is masked, and an argument list's --api-key value too (harness.server.redact). Only a
    variable's name is judged: `benchmark.max_tokens` is no secret."""
    group, _, name = key.rpartition(".")
    if group.endswith(".env") and is_secret_name(name):
        return REDACTED
    if isinstance(value, str):
        return redact_url_passwords(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [REDACTED if v is None else v for v in redacted_argv(value)]
    return value


def setup_key(cfg: DictConfig, software: Mapping[str, Any] | None = None, **kinds: Any) -> str:
    """The setup as a short hash: a study reuses a baseline, and recognises a duplicate trial,
    only while this is unchanged."""
    return digest(setup(cfg, software, **kinds))


def digest(flat: Mapping[str, Any]) -> str:
    blob = json.dumps(dict(flat), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys (an empty one adds none); lists and scalars are values
    (JSON-plain)."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    plain = json.loads(json.dumps(node, default=str))
    return {prefix.rstrip("."): plain}


def differences(stored: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """`key: stored → now` for every key of two setups whose value differs."""
    return [
        f"{key}: {_text(stored, key)} → {_text(now, key)}"
        for key in sorted({*stored, *now})
        if stored.get(key, _UNSET) != now.get(key, _UNSET)
    ]


_UNSET = object()


def _text(values: Mapping[str, Any], key: str) -> str:
    if key not in values:
        return "(unset)"
    value = values[key]
    return value if isinstance(value, str) else json.dumps(value)
