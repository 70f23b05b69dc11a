"""Benchmark prompts: the bundled reasoning set or a user's JSONL file.

Each line is `{"prompt": "..."}` or `{"messages": [...]}` (chat format), with an optional `id`.
The order is fixed per seed, so every trial of a study sees the same prompts in the same order.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

BUILTIN = "builtin"


@dataclass(frozen=True)
class Prompt:
    id: str
    messages: tuple[dict[str, str], ...]


def _parse_line(line: str, lineno: int, source: str) -> Prompt:
    try:
        record: dict[str, Any] = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{lineno}: not valid JSON ({exc.msg}).") from exc
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and "role" in m and "content" in m for m in messages
        ):
            raise ConfigError(
                f"{source}:{lineno}: 'messages' must be a list of {{role, content}} objects."
            )
    elif isinstance(record.get("prompt"), str) and record["prompt"].strip():
        messages = [{"role": "user", "content": record["prompt"]}]
    else:
        raise ConfigError(
            f"{source}:{lineno}: each line needs a non-empty 'prompt' string or a 'messages' list."
        )
    return Prompt(id=str(record.get("id", f"line-{lineno}")), messages=tuple(messages))


def load_prompts(source: str, seed: int = 0) -> list[Prompt]:
    """Load prompts from `builtin` or a JSONL path, shuffled deterministically by `seed`."""
    if source == BUILTIN:
        text = resources.files("harness").joinpath("data/prompts.jsonl").read_text()
        name = "builtin prompts"
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"benchmark.prompts={source!r}: no such file. Give a JSONL file with one "
                '{"prompt": ...} or {"messages": [...]} per line, or \'builtin\'.'
            )
        text = path.read_text()
        name = str(path)
    prompts = [
        _parse_line(line, i, name) for i, line in enumerate(text.splitlines(), 1) if line.strip()
    ]
    if not prompts:
        raise ConfigError(f"{name}: contains no prompts.")
    random.Random(seed).shuffle(prompts)
    return prompts
