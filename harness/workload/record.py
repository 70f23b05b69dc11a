"""What a trial measured with, written to its folder as workload.json: the workload's name,
source and categories, a content hash, how many prompts of each category and how long they are.

Prompt lengths are estimates (characters / 4, about right for English prose and code with
the tokenizers of the supported models): the harness has no tokenizer; the server's own
prompt token counts are in requests.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from harness.workload import load_prompts
from harness.workload.prompt import Prompt

FILE = "workload.json"


def estimated_tokens(prompt: Prompt) -> int:
    return max(1, sum(len(m["content"]) for m in prompt.messages) // 4)


def digest(prompts: list[Prompt]) -> str:
    """sha256 of the prompts as sent (ids, categories and messages), order-independent: the
    same prompts give the same hash whatever the file's order, the seed or the source's path."""
    rows = sorted(
        json.dumps([p.id, p.category, list(p.messages)], sort_keys=True, ensure_ascii=False)
        for p in prompts
    )
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _length_stats(values: list[int]) -> dict[str, int]:
    ordered = sorted(values)
    return {
        "min": ordered[0],
        "median": int(statistics.median(ordered)),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
    }


def describe(name: str, source: str, categories: tuple[str, ...], seed: int = 0) -> dict[str, Any]:
    prompts = load_prompts(source, seed, categories)
    lengths = [estimated_tokens(p) for p in prompts]
    by_category: dict[str, list[int]] = {}
    for p, n in zip(prompts, lengths, strict=True):
        by_category.setdefault(p.category, []).append(n)
    return {
        "name": name,
        "source": source,
        "categories": list(categories),
        "sha256": digest(prompts),
        "prompts": len(prompts),
        "count_per_category": dict(sorted(Counter(p.category for p in prompts).items())),
        "est_prompt_tokens": _length_stats(lengths),
        "est_prompt_tokens_per_category": {
            c: _length_stats(v) for c, v in sorted(by_category.items())
        },
    }


def write(
    folder: Path,
    name: str,
    source: str,
    categories: tuple[str, ...],
    sampling: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """workload.json; `sampling`: the requests' temperature/top_p/top_k and their source."""
    record = describe(name, source, categories)
    if sampling is not None:
        record["sampling"] = sampling
    (folder / FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def read(folder: Path) -> dict[str, Any] | None:
    path = folder / FILE
    return json.loads(path.read_text()) if path.is_file() else None
