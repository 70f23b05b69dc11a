"""What every measured request carries, as the config chooses it: the workload (its name, prompt
source and categories) and the sampling (temperature/top_p/top_k, and where they came from).

Both are read by the benchmark spec and by the setup key, and both accept the deprecated
spellings (benchmark.prompts, benchmark.temperature) with a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.measure.sampling import MODES as SAMPLING_MODES
from harness.measure.sampling import generation_config_sampling

log = logging.getLogger(__name__)


def workload_choice(cfg: DictConfig) -> tuple[str, str, tuple[str, ...]]:
    """The workload's name, source and categories (benchmark.workload; benchmark.prompts=PATH
    is the old spelling of benchmark/workload=file)."""
    b = cfg.benchmark
    w = b.workload
    if b.prompts is not None:
        log.warning(
            "benchmark.prompts is deprecated: use benchmark/workload=file "
            "benchmark.workload.source=%s (or benchmark/workload=<name> for a bundled set)",
            b.prompts,
        )
        if b.prompts != "builtin":
            if not Path(str(b.prompts)).expanduser().is_file():  # name the key the user set
                raise ConfigError(
                    f"benchmark.prompts={b.prompts!r}: no such file. Use benchmark/workload=file "
                    "benchmark.workload.source=/path/to/prompts.jsonl, or 'builtin'."
                )
            return "file", b.prompts, ()
    if w.source is None:
        raise ConfigError(
            f"benchmark.workload.source is required for workload {w.name!r}: give "
            "benchmark.workload.source=/path/to/prompts.jsonl (JSONL of prompt or messages "
            "records, or ShareGPT JSON/JSONL)."
        )
    return w.name, w.source, tuple(w.categories)


def sampling_choice(cfg: DictConfig) -> dict[str, Any]:
    """temperature/top_p/top_k for every measured request, and where they came from: greedy
    when benchmark.sampling=greedy; else the model's generation_config.json where the checkpoint
    is on this machine (model.sampling.from_generation_config), else model.sampling."""
    b, s = cfg.benchmark, cfg.model.sampling
    if b.sampling not in SAMPLING_MODES:
        raise ConfigError(
            f"benchmark.sampling={b.sampling!r} is unknown: use one of "
            f"{', '.join(SAMPLING_MODES)} (model: the model's own sampling, model.sampling; "
            "greedy: temperature 0)."
        )
    if b.sampling == "greedy":
        return {"temperature": 0.0, "top_p": 1.0, "top_k": None, "source": "benchmark.sampling"}
    values: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k}
    source = f"model.sampling ({cfg.model.name})"
    found = generation_config_sampling(cfg.model.path) if s.from_generation_config else None
    if found is not None:
        values.update(found[0])
        source = str(found[1])
    if b.temperature is not None:
        log.warning(
            "benchmark.temperature is deprecated: use model.sampling.temperature=%s, or "
            "benchmark.sampling=greedy for 0",
            b.temperature,
        )
        values["temperature"] = b.temperature
        source = "benchmark.temperature"
    values["temperature"] = float(values["temperature"])
    values["top_p"] = float(values["top_p"])
    return {**values, "source": source}
