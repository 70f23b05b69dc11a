"""The setup key: what a measurement depends on besides the searched values, hashed (engine,
model, hardware, benchmark, the fixed server knobs, the engine's software, the prompts' content,
the sampling)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.workload import load_prompts
from harness.workload.record import digest as prompts_digest
from sweep.config.specs import SEARCHED
from sweep.config.workload import sampling_choice, workload_choice


def setup_key(cfg: DictConfig, software: Mapping[str, Any] | None = None) -> str:
    """What a measurement depends on besides the searched values: a study reuses a baseline,
    and recognises a duplicate trial, only while this is unchanged. `software` is what the
    engine runs on (`sweep.tracking.provenance.software`: SGLang, torch, driver and CUDA versions,
    or the simulator's), read once per sweep: after an upgrade nothing measured before is reused."""
    parts: dict[str, Any] = {
        group: OmegaConf.to_container(cfg[group], resolve=True)
        for group in ("engine", "model", "hardware", "benchmark")
    }
    server = OmegaConf.to_container(cfg.server, resolve=True)
    assert isinstance(server, dict)
    parts["server"] = {k: v for k, v in server.items() if k not in SEARCHED and k != "port"}
    if software is not None:
        parts["software"] = dict(software)
    # What the config names only by reference: the prompts' content (a user's file edited in
    # place) and the sampling a local generation_config.json supplies.
    _, source, categories = workload_choice(cfg)
    parts["prompts"] = prompts_digest(load_prompts(source, 0, categories))
    parts["sampling"] = sampling_choice(cfg)
    if not OmegaConf.select(cfg, "search.baseline_equal_caps", default=True):
        parts["baseline_equal_caps"] = False  # an uncapped baseline is another measurement
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:10]
