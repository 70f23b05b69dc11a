from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.workload import load_prompts


def test_builtin_prompts_are_reasoning_prompts_in_a_fixed_order():
    first = load_prompts("builtin", seed=0)
    assert len(first) >= 60
    assert [p.id for p in first] == [p.id for p in load_prompts("builtin", seed=0)]
    assert [p.id for p in first] != [p.id for p in load_prompts("builtin", seed=1)]
    assert {p.id.split("-")[0] for p in first} >= {"math", "code", "science", "logic"}


def test_jsonl_with_prompt_or_messages(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"id": "a", "prompt": "hi"}\n\n{"messages": [{"role": "user", "content": "x"}]}\n'
    )
    prompts = load_prompts(str(path))
    assert {p.id for p in prompts} == {"a", "line-3"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json\n", "p.jsonl:1: not valid JSON"),
        ('{"text": "x"}\n', "needs a non-empty 'prompt'"),
        ('{"messages": [{"content": "x"}]}\n', "'messages' must be a list"),
        ("\n", "contains no prompts"),
    ],
)
def test_malformed_prompt_files_are_refused_with_the_line(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_prompts(str(path))


def test_missing_prompt_file():
    with pytest.raises(ConfigError, match="no such file"):
        load_prompts("/nonexistent/prompts.jsonl")
