"""Benchmark workloads: the bundled prompts (harness/data/*.jsonl) or a user's own file.

A workload is a list of `Prompt`s: an id, the OpenAI chat messages to send and a category. The
bundled set spans reasoning (math, code, science, logic), long documents and code files,
multi-turn conversations and a data-generation set that shares one long system prompt
(docs/benchmark.md, "The workload"). A user's file may be JSONL of `{"prompt": ...}` or
`{"messages": [...]}`, or ShareGPT conversations (`harness.workload.formats`).

The order is fixed per seed, so every trial of a study sees the same prompts in the same order.

__init__  load_prompts: the bundled set or a file, selected and ordered by seed (this file)
prompt    one benchmark prompt: messages, id, category, round
formats   users' files: JSONL, OpenAI messages, ShareGPT, each error naming the line
record    what a trial measured with, written as workload.json
"""

from __future__ import annotations

import functools
import gzip
import random
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from harness.errors import ConfigError
from harness.workload.formats import parse_file, parse_jsonl
from harness.workload.prompt import Prompt

__all__ = ["BUILTIN", "REASONING", "Prompt", "load_prompts", "read_source", "select"]

BUILTIN = "builtin"
# The bundled reasoning categories: the default workload (conf/benchmark/workload/reasoning.yaml).
REASONING = ("math", "code", "science", "logic")
# The bundled files, each a JSONL of {"id", "category", "prompt" | "messages"} (package data);
# datagen_pipeline's 1,300 copies of one system prompt are stored gzipped (4.4 MB -> 52 kB).
BUNDLED_FILES = (
    "prompts.jsonl",
    "long_context.jsonl",
    "multi_turn.jsonl",
    "datagen.jsonl",
    "datagen_pipeline.jsonl.gz",
)


@functools.cache
def bundled_text() -> tuple[tuple[str, str], ...]:
    """(file name, text) of every bundled file, in a fixed order; read once per process (package
    data does not change under a running sweep)."""
    data = resources.files("harness").joinpath("data")
    return tuple((name, _read(data.joinpath(name).read_bytes(), name)) for name in BUNDLED_FILES)


def _read(raw: bytes, name: str) -> str:
    return (gzip.decompress(raw) if name.endswith(".gz") else raw).decode("utf-8")


def source_bytes(source: str) -> bytes:
    """The bytes a workload is read from: what its content hash covers."""
    if source == BUILTIN:
        return b"".join(text.encode() for _, text in bundled_text())
    return _user_path(source).read_bytes()


def _user_path(source: str) -> Path:
    path = Path(source).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"benchmark.workload.source={source!r}: no such file. Give a JSONL file with one "
            '{"prompt": ...} or {"messages": [...]} per line, a ShareGPT JSON/JSONL file '
            "(conversations: [{from, value}]), or 'builtin'."
        )
    return path


def read_source(source: str) -> list[Prompt]:
    """Every prompt of `source` (`builtin` or a path), in file order. Parsed once per process
    and file version: a sweep reads its workload for every check, digest and benchmark of every
    trial (the bundled set is 4.8 MB of JSON, about 0.2 s a parse), and a file edited under a
    running sweep is read again (its modification time and size are the key)."""
    if source == BUILTIN:
        return list(_parsed(source, None, None))
    path = _user_path(source).resolve()
    stat = path.stat()
    return list(_parsed(source, path, (stat.st_mtime_ns, stat.st_size)))


@functools.lru_cache(maxsize=8)
def _parsed(source: str, path: Path | None, stamp: tuple[int, int] | None) -> tuple[Prompt, ...]:
    if path is None:
        prompts: list[Prompt] = []
        for name, text in bundled_text():
            prompts += parse_jsonl(text, f"harness/data/{name}")
    else:
        prompts = parse_file(path.read_text(encoding="utf-8"), str(Path(source).expanduser()))
    if not prompts:
        raise ConfigError(f"{source}: contains no prompts.")
    seen: set[str] = set()
    for p in prompts:
        if p.id in seen:
            raise ConfigError(
                f"{source}: prompt id {p.id!r} appears twice: ids must be unique (the results "
                "name each prompt by its id). Rename one, or drop the ids to number the lines."
            )
        seen.add(p.id)
    return tuple(prompts)


def select(prompts: list[Prompt], categories: Sequence[str], source: str) -> list[Prompt]:
    """The prompts of `categories` (empty: all); an unknown category names the choices."""
    if not categories:
        return prompts
    present = sorted({p.category for p in prompts})
    unknown = [c for c in categories if c not in present]
    if unknown:
        raise ConfigError(
            f"benchmark.workload.categories: {', '.join(map(repr, unknown))} not in {source}; "
            f"its categories are {', '.join(map(repr, present))}. Pick from those, or give "
            "categories: [] for all of them."
        )
    wanted = set(categories)
    return [p for p in prompts if p.category in wanted]


def load_prompts(source: str, seed: int = 0, categories: Sequence[str] = ()) -> list[Prompt]:
    """Load prompts from `builtin` or a file, keep `categories` (empty: all), and shuffle them
    deterministically by `seed`."""
    prompts = select(read_source(source), categories, source)
    random.Random(seed).shuffle(prompts)
    return prompts
