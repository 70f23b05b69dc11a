"""The study's view in MLflow's UI (sweep.tracking.view), on a real sqlite MLflow store: the tag
the UI reads, the runs its filter and order give back, the link the sweep prints."""

from __future__ import annotations

import json
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

from harness.record.layout import sqlite_uri
from harness.record.results import Outcome, TrialResult
from sweep.tracking import view
from sweep.tracking.runs import Tracker

SEARCHED = ["speculative_num_steps", "speculative_eagle_topk", "mem_fraction_static"]


def tracker(tmp_path) -> Tracker:
    return Tracker(sqlite_uri(tmp_path / "mlflow.db"), "study", tmp_path / "artifacts")


def views(t: Tracker) -> dict[str, dict]:
    tags = t.client.get_experiment(t.experiment_id).tags
    return {k: json.loads(v) for k, v in tags.items() if k.startswith("mlflow.sharedViewState.")}


def trial(name: str, outcome: Outcome, tok_s: float | None, role: str = "trial") -> TrialResult:
    params = {"speculative_num_steps": 3, "speculative_eagle_topk": 1}
    result = TrialResult(name, role, outcome, "sim", True, 1.0, params if role == "trial" else {})
    if tok_s is not None:
        result.metrics = {"tok_s": tok_s, "accept_len": 2.0}
    return result


def test_the_view_is_a_tag_the_ui_reads_naming_the_columns_and_the_order(tmp_path):
    t = tracker(tmp_path)
    key = view.write_view(t.client, t.experiment_id, "study", ["tok_s"], SEARCHED)
    assert key == "specsweep-study"
    (tag,) = views(t).items()
    assert tag[0] == "mlflow.sharedViewState.specsweep-study"
    envelope = tag[1]  # the UI's saved-view envelope: name, createdAt, updatedAt, state (a string)
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    columns = state["selectedColumns"]
    assert columns[:5] == [
        "metrics.`tok_s`",
        "metrics.`accept_len`",
        "metrics.`speedup_vs_baseline`",
        "tags.`specsweep.outcome`",
        "params.`speculative_num_steps`",
    ]
    assert set(columns) >= {f"params.`{p}`" for p in SEARCHED}
    assert state["columnOrder"] == columns
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`tok_s`", False)
    # The UI nests child runs under a parent only when sorted by start time without a filter
    # (3.17.2 bundle: nestChildren = !orderByKey && !searchFilter || orderByKey === DATE), and it
    # drops runsExpanded from a shared view: the view lists every run flat instead.
    assert state["orderByKey"] != "attributes.start_time" and state["searchFilter"]
    assert "runsExpanded" not in state
    charts = state["compareRunCharts"]
    assert [c["metricKey"] for c in charts if c["type"] == "BAR"] == list(view.RUN_METRICS)
    (parallel,) = [c for c in charts if c["type"] == "PARALLEL"]
    assert parallel["selectedParams"] == SEARCHED and parallel["selectedMetrics"] == ["tok_s"]


def test_the_views_filter_and_order_give_the_trials_and_baseline_flat_best_first(tmp_path):
    t = tracker(tmp_path)
    parent = t.start_sweep("sweep-1", tags={"specsweep.study": "study"}, params={})
    for result in (
        trial("baseline", Outcome.OK, 80.0, role="baseline"),
        trial("trial_0000", Outcome.OK, 90.0),
        trial("trial_0001", Outcome.DUPLICATE, 90.0),
        trial("trial_0002", Outcome.OOM, None),
        trial("trial_0003", Outcome.OK, 85.0),
    ):
        t.upload_trial(result, parent_run_id=parent, study="study", baseline_tok_s=80.0)
    other = Tracker(t.tracking_uri, "study", tmp_path / "artifacts")
    other.upload_trial(
        trial("elsewhere", Outcome.OK, 99.0), parent_run_id=None, study="other", baseline_tok_s=None
    )
    view.write_view(t.client, t.experiment_id, "study", ["tok_s"], SEARCHED)
    state = json.loads(views(t)["mlflow.sharedViewState.specsweep-study"]["state"])
    # What the UI asks the server for: the view's filter and order, as MLflow's search reads them
    order = state["orderByKey"].replace("`", "") + (" ASC" if state["orderByAsc"] else " DESC")
    runs = t.client.search_runs([t.experiment_id], state["searchFilter"], order_by=[order])
    names = [r.info.run_name for r in runs]
    # the duplicate, the parent run (no outcome) and the other study's trial are not in it
    assert names == ["trial_0000", "trial_0003", "baseline", "trial_0002"]
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent}  # each still nested
    # 1.125 and 1.0625, logged at a ratio's digits (harness.record.precision)
    assert [r.data.metrics["speedup_vs_baseline"] for r in runs[:2]] == [1.125, 1.062]


def test_a_resumed_sweep_rewrites_the_studys_view_instead_of_adding_one(tmp_path, monkeypatch):
    clock = iter([1000.0, 2000.0])  # the view module's clock only
    monkeypatch.setattr(view, "time", SimpleNamespace(time=lambda: next(clock)))
    first = tracker(tmp_path)
    view.write_view(first.client, first.experiment_id, "study", ["tok_s"], SEARCHED)
    resumed = tracker(tmp_path)  # the next sweep opens the same experiment
    view.write_view(resumed.client, resumed.experiment_id, "study", ["tok_s"], SEARCHED[:2])
    (envelope,) = views(resumed).values()
    assert (envelope["createdAt"], envelope["updatedAt"]) == (1_000_000, 2_000_000)
    assert "params.`mem_fraction_static`" not in json.loads(envelope["state"])["selectedColumns"]


def test_a_weighted_objective_no_run_carries_ranks_by_tok_s_and_a_level_one_by_itself():
    weighted = view.view_state("s", ["weighted_throughput"], [])
    assert weighted["orderByKey"] == "metrics.`tok_s`"
    assert "metrics.`weighted_throughput`" not in weighted["selectedColumns"]
    level = view.view_state("s", ["output_tok_s_c64"], [])
    assert level["orderByKey"] == "metrics.`output_tok_s_c64`"
    assert level["selectedColumns"][0] == "metrics.`output_tok_s_c64`"


def test_the_key_is_url_safe_and_tells_apart_names_that_slug_alike():
    assert view.view_key("kimi-k25-eagle3") == "specsweep-kimi-k25-eagle3"
    a, b = view.view_key("my study"), view.view_key("my/study")
    assert a != b and a.startswith("specsweep-my-study-")
    assert all(c.isalnum() or c in "-_" for c in a + b)
    assert view.study_filter("it's") == (
        "tags.`specsweep.study` = \"it's\" and tags.`specsweep.outcome` != 'duplicate'"
    )


def test_the_link_opens_the_runs_tab_of_the_machine_learning_workflow_on_the_view():
    link = view.view_link("http://host:5000/", "7", "specsweep-s")
    assert link.startswith("http://host:5000/#/experiments/7/runs?")
    query = parse_qs(urlsplit(link).fragment.split("?", 1)[1])
    assert query == {"viewStateShareKey": ["specsweep-s"], "workflowType": ["machine_learning"]}
    assert "viewStateShareKey" not in view.view_link("http://h", "7", None)
    assert view.view_link("http://h", "7", "k", mode="CHART").endswith("compareRunsMode=CHART")


def test_a_view_mlflow_refuses_is_a_warning_not_a_failed_sweep(tmp_path, capsys):
    t = tracker(tmp_path)
    too_long = "s" * 300  # a tag key over MLflow's 250 characters
    assert view.write_view(t.client, t.experiment_id, too_long, ["tok_s"], SEARCHED) is None
    assert "not written" in capsys.readouterr().out
    assert views(t) == {}
