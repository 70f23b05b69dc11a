"""The bundled workload, users' formats and the workload record (harness.workload)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from harness.errors import ConfigError
from harness.workload import load_prompts, record
from harness.workload.record import estimated_tokens
from tests.conftest import ROOT

DATA = ROOT / "harness" / "data"


def test_the_bundled_workload_has_every_category_with_ids_and_real_variety():
    prompts = load_prompts("builtin")
    counts = Counter(p.category for p in prompts)
    assert len(prompts) >= 300
    assert set(counts) == {
        "math", "code", "science", "logic", "long_context", "multi_turn", "datagen",
        "datagen_pipeline",
    }  # fmt: skip
    assert min(counts.values()) >= 13
    assert len({p.id for p in prompts}) == len(prompts)
    texts = [p.messages[-1]["content"] for p in prompts]
    assert len(set(texts)) == len(texts)  # no prompt twice


def test_long_context_prompts_run_to_thousands_of_tokens():
    lengths = sorted(estimated_tokens(p) for p in load_prompts("builtin", 0, ["long_context"]))
    assert lengths[0] > 1000 and lengths[len(lengths) // 2] > 2500 and lengths[-1] > 8000


def test_multi_turn_prompts_hold_earlier_assistant_turns_and_end_with_the_user():
    for p in load_prompts("builtin", 0, ["multi_turn"]):
        roles = [m["role"] for m in p.messages]
        assert "assistant" in roles and roles[-1] == "user"


@pytest.mark.parametrize(("category", "count"), [("datagen", 50), ("datagen_pipeline", 1300)])
def test_datagen_prompts_share_one_long_system_prefix(category, count):
    prompts = load_prompts("builtin", 0, [category])
    assert len(prompts) == count
    systems = {p.messages[0]["content"] for p in prompts}
    assert len(systems) == 1 and all(p.messages[0]["role"] == "system" for p in prompts)
    assert 500 <= len(next(iter(systems))) // 4 <= 2500  # several hundred to ~2k tokens
    assert len({p.messages[-1]["content"] for p in prompts}) == len(prompts)


def test_categories_select_and_an_unknown_one_names_the_choices():
    assert {p.category for p in load_prompts("builtin", 0, ["math", "code"])} == {"math", "code"}
    with pytest.raises(ConfigError, match=r"'poetry' not in builtin; its categories are .*'math'"):
        load_prompts("builtin", 0, ["poetry"])


def test_openai_messages_jsonl(tmp_path):
    path = tmp_path / "chat.jsonl"
    rows = [
        {"id": "c1", "category": "support", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Reset my password"},
        ]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (p,) = load_prompts(str(path))
    assert (p.id, p.category, len(p.messages)) == ("c1", "support", 4)


@pytest.mark.parametrize("as_list", [True, False])
def test_sharegpt_conversations_end_at_the_last_human_turn(tmp_path, as_list):
    conversation = {
        "id": "sg1",
        "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": "What is 2+2?"},
            {"from": "gpt", "value": "4"},
            {"from": "human", "value": "And 3+3?"},
            {"from": "gpt", "value": "6"},
        ],
    }
    other = {"conversations": [{"from": "human", "value": "Hello"}]}
    path = tmp_path / ("sg.json" if as_list else "sg.jsonl")
    if as_list:
        path.write_text(json.dumps([conversation, other], indent=1))
    else:
        path.write_text(json.dumps(conversation) + "\n" + json.dumps(other) + "\n")
    prompts = {p.id: p for p in load_prompts(str(path))}
    first = prompts["sg1"]
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "user"]
    assert first.messages[-1]["content"] == "And 3+3?"
    assert set(prompts) == {"sg1", "item-2" if as_list else "line-2"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"conversations": [{"from": "gpt", "value": "hi"}]}\n', r"p.jsonl:1: .*no human turn"),
        ('{"conversations": [{"from": "alien", "value": "x"}]}\n', r"p.jsonl:1: .*human, gpt"),
        ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}]}',
         r"p.jsonl:1: the last message is from 'assistant'"),
        ('{"messages": [{"role": "robot", "content": "x"}]}\n', r"p.jsonl:1: .*role 'robot'"),
        ('[{"conversations": 3}]', r"p.jsonl: item 1: 'conversations' must be"),
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "'a' appears twice"),
        ("[1, 2", r"p.jsonl:1: not valid JSON .*one JSON list"),
    ],
)  # fmt: skip
def test_malformed_user_files_name_the_file_line_and_fix(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_prompts(str(path))


def test_workload_json_records_source_hash_counts_and_lengths(tmp_path):
    written = record.write(
        tmp_path, "reasoning", "builtin", ("math", "logic"), {"temperature": 1.0}
    )
    again = record.read(tmp_path)
    assert again == written
    # counted independently, from the bundled file itself
    bundled = [json.loads(line)["category"] for line in (DATA / "prompts.jsonl").open()]
    counts = {c: bundled.count(c) for c in ("logic", "math")}
    assert again["count_per_category"] == counts and min(counts.values()) > 0
    assert again["prompts"] == sum(counts.values()) and len(again["sha256"]) == 64
    assert again["est_prompt_tokens"]["min"] <= again["est_prompt_tokens"]["median"]
    assert again["sampling"] == {"temperature": 1.0}
    # the hash is the prompts', not the file's order or the seed
    other = record.describe("x", "builtin", ("logic", "math"), seed=7)
    assert other["sha256"] == again["sha256"]
    assert record.describe("x", "builtin", ("math",))["sha256"] != again["sha256"]
