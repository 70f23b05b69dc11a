"""Multi-round users (harness/measure/rounds.py): the next round's request is the history, the
streamed answer and a follow-up; more users than slots are served least recently served first; a
user that failed or finished its rounds makes room for a new one; the chat stream's answer text is
kept only when rounds need it."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.measure.client import _StreamState
from harness.measure.rounds import Users, follow_up
from harness.measure.timeline import Timeline
from harness.record.results import RequestRecord
from harness.spec import BenchmarkSpec
from harness.workload.prompt import Prompt


def prompt(i: int) -> Prompt:
    messages = ({"role": "system", "content": "S"}, {"role": "user", "content": f"q{i}"})
    return Prompt(f"p{i}", messages)


def source():
    i = 0
    while True:
        yield prompt(i)
        i += 1


def done(p: Prompt, answer: str = "A", ok: bool = True) -> Timeline:
    record = RequestRecord("measure", 1, 2, p.id, 0.0, 0.1, 1.0, completion_tokens=5, round=p.round)
    if not ok:
        record.error = "HTTP 500"
    return Timeline(record, answer=answer)


def test_follow_up_appends_the_answer_and_the_next_user_turn():
    nxt = follow_up(prompt(0), "the answer", prompt(7))
    assert nxt.round == 2 and nxt.id == "p0#2"
    assert nxt.messages[-2:] == (
        {"role": "assistant", "content": "the answer"},
        {"role": "user", "content": "q7"},
    )
    assert nxt.messages[:2] == prompt(0).messages  # the history is a prefix: the cache can hit
    assert follow_up(nxt, "b", prompt(8)).id == "p0#3"


def test_one_user_per_slot_comes_back_at_once_until_its_last_round():
    users = Users(source(), rounds=3, users=2)
    a, b = users.next(), users.next()
    assert (a.round, b.round) == (1, 1)
    users.answered(a, done(a))
    a2 = users.next()
    assert a2.round == 2 and a2.id == "p0#2"
    users.answered(a2, done(a2))
    a3 = users.next()
    assert a3.round == 3
    users.answered(a3, done(a3))  # its last round: a new user takes the slot
    assert users.next().round == 1


def test_more_users_than_slots_wait_least_recently_served_first():
    users = Users(source(), rounds=4, users=3)
    first = [users.next(), users.next()]  # two slots; two users open
    users.answered(first[0], done(first[0]))
    third = users.next()  # fewer than 3 open: a new user, p0 waits
    assert third.round == 1
    users.answered(first[1], done(first[1]))
    assert users.next().id == "p0#2"  # p0 waited longest
    assert users.next().id == "p1#2"


def test_a_failed_or_cut_round_ends_its_user():
    users = Users(source(), rounds=3, users=1)
    a = users.next()
    users.answered(a, done(a, ok=False))
    assert users.next().round == 1


def test_one_round_sends_the_source_as_it_comes():
    users = Users(source(), rounds=1, users=2)
    sent = []
    for _ in range(4):
        p = users.next()
        users.answered(p, done(p))
        sent.append(p.id)
    assert sent == ["p0", "p1", "p2", "p3"]


def test_the_stream_keeps_the_answer_text_only_when_asked():
    chunks = [
        {"choices": [{"delta": {"reasoning_content": "think "}}]},
        {"choices": [{"delta": {"content": "Hello"}}]},
        {"choices": [{"delta": {"content": " world"}, "finish_reason": "stop"}]},
    ]
    kept, plain = _StreamState("chat", keep_text=True), _StreamState("chat")
    for chunk in chunks:
        kept.add(chunk)
        plain.add(chunk)
    assert kept.answer() == "Hello world" and plain.answer() == ""
    thinking = _StreamState("chat", keep_text=True)
    thinking.add(chunks[0])
    assert thinking.answer() == "think "  # cut while reasoning: the reasoning is the answer


def test_rounds_are_checked():
    assert BenchmarkSpec(model="m", rounds=3, users=64).rounds == 3
    with pytest.raises(ConfigError, match=r"benchmark\.rounds"):
        BenchmarkSpec(model="m", rounds=0)
    with pytest.raises(ConfigError, match="api=chat"):
        BenchmarkSpec(model="m", rounds=2, api="generate")


def test_ttft_by_round_groups_the_measured_completions():
    import pandas as pd

    from analysis.requests import ttft_by_round

    rows = [
        {"trial": "t", "run": 1, "round": k, "phase": phase, "error": error, "ttft_s": ttft}
        for k, phase, error, ttft in [
            (1, "measure", None, 0.5),
            (1, "measure", None, 1.5),
            (2, "measure", None, 3.0),
            (2, "measure", "cut", 9.0),  # not a completion
            (2, "warmup", None, 9.0),  # not measured
        ]
    ]
    table = ttft_by_round(pd.DataFrame(rows))
    assert list(table["round"]) == [1, 2] and list(table["requests"]) == [2, 1]
    assert list(table["ttft_s_mean"]) == [1.0, 3.0]
