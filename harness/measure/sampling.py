"""The sampling a model is served with, read from its own generation_config.json.

SGLang 0.5.23 does the same for requests that leave sampling unset (`--sampling-defaults model`:
srt/configs/model_config.py, `get_default_sampling_params`, which takes temperature, top_k and
top_p, among others, from the file and ignores `do_sample`). specsweep sends its values
explicitly in every request, so what is measured does not depend on the server's default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.drafter_gate import local_checkpoint
from harness.errors import ConfigError

KEYS = ("temperature", "top_p", "top_k")
MODES = ("model", "greedy")  # benchmark.sampling


def generation_config_sampling(model_path: str) -> tuple[dict[str, Any], Path] | None:
    """temperature/top_p/top_k from the checkpoint's generation_config.json (a local directory
    or a hub id's cached snapshot), and the file; None when there is no such file here."""
    folder = local_checkpoint(model_path)
    path = folder / "generation_config.json" if folder else None
    if path is None or not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not readable JSON ({exc}). Fix the file, or set "
            "model.sampling.from_generation_config=false to use model.sampling's values."
        ) from exc
    values = {k: config[k] for k in KEYS if isinstance(config, dict) and config.get(k) is not None}
    return values, path
