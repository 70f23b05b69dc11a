"""A study runs from its snapshot of conf/: edits after it started never reach its trials
silently. The first sweep copies conf/ into the study's folder; a later sweep composes from
that copy, names the files that differ, and is refused where they change what a trial measures.

Editing the repository's conf/ under a running suite would disturb other tests, so the edits
here go into the study's copy: to the sweep that is the same difference (the copy and conf/
disagree), seen from the other side.
"""

from __future__ import annotations

import json

import yaml

from harness.server.procs import free_port
from tests.e2e.test_sweep_cli import sweep

QUIET = ("search.n_trials=1", "search.remeasure_baseline=false")


def edit_yaml(path, **values) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(values)
    path.write_text(yaml.safe_dump(data))


def test_a_resume_composes_from_the_studys_snapshot_and_refuses_incomparable_edits(tmp_path):
    port = free_port()
    first = sweep(tmp_path, port, *QUIET, "verbose=true")
    assert first.returncode == 0, first.stdout + first.stderr
    frozen = tmp_path / "kimi-k25-eagle3" / "snapshot" / "conf"
    assert "configuration frozen for the study" in first.stdout
    manifest = json.loads((frozen.parent / "manifest.json").read_text())
    assert "benchmark/reasoning_2048.yaml" in manifest["files"]

    # An edit of what trials measure (which prompts each run draws) makes them incomparable,
    # named key by key, stored -> now.
    benchmark = frozen / "benchmark" / "reasoning_2048.yaml"
    original = benchmark.read_text()
    edit_yaml(benchmark, seed=5)
    refused = sweep(tmp_path, port, "search.n_trials=2", "search.remeasure_baseline=false")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    out = " ".join(refused.stdout.split())
    assert "conf/benchmark/reasoning_2048.yaml changed since study 'kimi-k25-eagle3'" in out
    assert "benchmark.seed: 5 → 0" in out and "drop search.study_name=kimi-k25-eagle3" in out
    assert "Traceback" not in refused.stdout + refused.stderr
    assert not (tmp_path / "kimi-k25-eagle3" / "trial_0002").exists()
    benchmark.write_text(original)

    # An edit of a timeout (how long a slow request may take) measures the same: not applied.
    edit_yaml(benchmark, min_request_tok_s=4.0)
    timeout = sweep(tmp_path, port, "search.n_trials=1", "search.remeasure_baseline=false")
    assert timeout.returncode == 0, timeout.stdout + timeout.stderr
    assert "in nothing a measurement depends on" in " ".join(timeout.stdout.split())
    benchmark.write_text(original)

    # An edit of the search file is comparable: named, not applied, and the trials compose from
    # the copy (its seed, not conf/'s, is in the new trial's recorded config).
    search = frozen / "search" / "eagle3_five.yaml"
    edit_yaml(search, seed=7)
    resumed = sweep(tmp_path, port, "search.n_trials=2", "search.remeasure_baseline=false")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "conf/search/eagle3_five.yaml changed since the study started" in resumed.stdout
    assert "the edit is not applied" in resumed.stdout
    newest = max((tmp_path / "kimi-k25-eagle3").glob("trial_*/config.yaml"))
    assert yaml.safe_load(newest.read_text())["search"]["seed"] == 7
