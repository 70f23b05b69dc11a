"""search_efficiency's --render-from over several runs: each set from one run, the header
naming which run gave which, and runs that cannot share a table refused with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import _common
from benchmarks._common import write_results
from benchmarks._search_runs import merged


def _run(tmp_path, name: str, sets: list[str], seeds: int = 50, when: str = "09:55") -> str:
    report = {
        "seeds": seeds,
        "noise": {"drift_sigma": 0.02},
        "budget_launches": 150,
        "arms": {"model": "the default sampler"},
        "sets": {s: {"landscapes": [s]} for s in sets},
        "produced": {"command": f"python b.py --{name}", "date": when, "machine": "2 cores"},
    }
    for s in sets:
        if s != "profiles":
            report[s.replace("-", "_")] = {"members": [f"{name}:{s}"]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(report))
    return str(path)


def test_one_whole_run_renders_as_before(tmp_path):
    one = _run(tmp_path, "all", ["profiles", "family"])
    report = merged([one])
    assert report["produced"] == json.loads(Path(one).read_text())["produced"]
    assert list(report["sets"]) == ["profiles", "family"]


def test_each_set_comes_from_the_run_named_and_the_header_says_which(tmp_path, monkeypatch):
    old = _run(tmp_path, "old", ["profiles", "family", "family-memory-tight"])
    new = _run(tmp_path, "new", ["family", "profiles"], when="16:30")
    report = merged([new, f"{old}:family-memory-tight"])
    assert list(report["sets"]) == ["profiles", "family", "family-memory-tight"]
    assert report["family"] == {"members": ["new:family"]}  # a set's own keys come with it
    assert report["family_memory_tight"] == {"members": ["old:family-memory-tight"]}
    assert [r["sets"] for r in report["produced"]] == [
        ["family", "profiles"],
        ["family-memory-tight"],
    ]
    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    text = write_results("x", [], simulated=True, made=report["produced"]).read_text()
    assert "  - family, profiles: `python b.py --new`, 16:30, 2 cores" in text.splitlines()
    assert "  - family-memory-tight: `python b.py --old`, 09:55, 2 cores" in text.splitlines()


def test_a_merged_render_is_a_source_and_keeps_the_run_behind_each_set(tmp_path):
    old = _run(tmp_path, "old", ["profiles", "family", "family-memory-tight"])
    new = _run(tmp_path, "new", ["family", "profiles"], when="16:30")
    first = tmp_path / "first.json"
    first.write_text(json.dumps(merged([new, f"{old}:family-memory-tight"])))
    tight = _run(tmp_path, "tight", ["family-memory-tight"], when="20:05")
    report = merged([f"{first}:profiles,family", tight])
    assert report["family_memory_tight"] == {"members": ["tight:family-memory-tight"]}
    assert [(r["command"], r["sets"]) for r in report["produced"]] == [
        ("python b.py --new", ["family", "profiles"]),
        ("python b.py --tight", ["family-memory-tight"]),
    ]  # the old run gave no set picked here, so the header no longer names it


def test_runs_that_cannot_share_a_table_are_refused_with_the_fix(tmp_path):
    a = _run(tmp_path, "a", ["profiles", "family"])
    b = _run(tmp_path, "b", ["family"], seeds=20)
    with pytest.raises(ValueError, match=r"seeds 20 where .* has 50"):
        merged([a, f"{b}:family"])
    with pytest.raises(ValueError, match="set family is given by an earlier source too"):
        merged([a, _run(tmp_path, "c", ["family"])])
    with pytest.raises(ValueError, match="no set family-shapes; it has profiles, family"):
        merged([f"{a}:family-shapes"])
    (tmp_path / "bad.json").write_text(json.dumps({"sets": {}}))
    with pytest.raises(ValueError, match="no seeds, noise, produced: not a JSON this benchmark"):
        merged([str(tmp_path / "bad.json")])
