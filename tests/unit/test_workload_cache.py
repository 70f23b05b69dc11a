"""A workload is parsed once per process and file version: a file edited under a running sweep
is read again, and a caller's shuffle never reaches another caller's prompts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.workload import BUILTIN, load_prompts, read_source


def _write(path: Path, texts: list[str]) -> None:
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    _write(path, ["one", "two"])
    assert [p.messages[0]["content"] for p in read_source(str(path))] == ["one", "two"]
    _write(path, ["one", "two", "three"])
    os.utime(path, ns=(1, 1))  # a different version even within the clock's resolution
    assert len(read_source(str(path))) == 3


def test_a_shuffle_does_not_reach_the_cache() -> None:
    first = read_source(BUILTIN)
    shuffled = load_prompts(BUILTIN, seed=7)
    assert [p.id for p in read_source(BUILTIN)] == [p.id for p in first]
    assert [p.id for p in shuffled] != [p.id for p in first]
    first.clear()
    assert read_source(BUILTIN)
