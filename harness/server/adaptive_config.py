"""SGLang's adaptive speculative config file (`--speculative-adaptive-config PATH`), read and
checked before a launch as SGLang's loader would read it (harness.sglang.adaptive; SGLang
0.5.23 srt/speculative/adaptive_spec_params.py `_load_adaptive_config`, and
srt/arg_groups/speculative_hook.py `_init_adaptive_speculative_params`).

An invalid file costs a model load to find out on a real server (SGLang reads it while it
resolves its arguments and exits with a ValueError); here it is a ConfigError naming the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.sglang.adaptive import ADAPTIVE_DEFAULT_CONFIG, adaptive_initial_steps, adaptive_slots


def load_adaptive_config(path: str | Path | None) -> dict[str, Any]:
    """The config a server started with `path` runs (None: SGLang's built-in default)."""
    if path is None:
        return {k: dict(v) for k, v in ADAPTIVE_DEFAULT_CONFIG.items()}
    where = f"server.speculative_adaptive_config={str(path)!r}"
    try:
        config = json.loads(Path(path).expanduser().read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{where} does not exist on this machine: write one with `python -m sweep.adaptive "
            "--study DIR --write-config` or drop the key for SGLang's built-in default."
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where} is not a readable JSON file: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(
            f"{where}: SGLang needs a JSON object keyed by batch size, e.g. "
            '{"1": {"candidate_steps": [1, 3]}}.'
        )
    try:
        adaptive_slots(config)
    except ValueError as exc:  # SGLang's own message
        raise ConfigError(f"{where}: SGLang refuses it: {exc}") from None
    return config


def check_initial_steps(config: dict[str, Any], steps: int | None, where: str) -> int:
    """The steps an adaptive server starts at; a ConfigError when SGLang would refuse them."""
    try:
        return adaptive_initial_steps(config, steps)
    except ValueError as exc:
        raise ConfigError(
            f"server.speculative_num_steps={steps} with {where}: SGLang refuses it ({exc}). "
            "Leave speculative_num_steps/topk/draft unset (SGLang starts at the middle "
            "candidate) or pick a candidate."
        ) from None
