"""The figures rank and label by the study's objective: a throughput study at 150 in flight
without a baseline is not drawn as single-stream speed "vs the baseline" in the wrong order."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from analysis import objective
from analysis.plots import history, speed_vs_baseline
from tests.unit.test_capacity_plots import C, frame

THROUGHPUT = {"name": "throughput", "metrics": [f"output_tok_s_c{C}"], "levels": [C]}


def capacity_frame(tmp_path):
    df = frame(tmp_path)
    df["tok_s"] = df["tok_s"].max() + 1 - df["tok_s"]  # single-stream order: the reverse
    return df


def test_a_throughput_study_ranks_and_labels_by_its_level(tmp_path):
    df = objective.apply(capacity_frame(tmp_path), THROUGHPUT)
    assert objective.of(df).column == f"output_tok_s_c{C}"
    ax = speed_vs_baseline(df).axes[0]
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == sorted(heights, reverse=True) and heights[0] == 650.0  # the study's best
    assert ax.get_ylabel() == f"output throughput at {C} in flight (tok/s)"
    assert "(no baseline measured)" in ax.get_title() and "vs the baseline" not in ax.get_title()
    labels = " ".join(t.get_text() for t in ax.get_xticklabels())
    assert "speculation off" in labels and "?/?/?" not in labels
    assert history(df).axes[0].get_ylabel() == objective.of(df).label


def test_without_a_recorded_objective_the_figures_rank_by_single_stream_speed(tmp_path):
    df = objective.apply(capacity_frame(tmp_path), None)
    assert objective.of(df) == objective.SINGLE_STREAM


def test_a_weighted_objective_is_computed_from_its_levels(tmp_path):
    df = frame(tmp_path)
    detail = {"name": "weighted_throughput", "metrics": ["weighted_throughput"], "levels": [C]}
    df = objective.apply(df, {**detail, "weights": [0.5]})
    assert list(df["weighted_throughput"].dropna()) == [200.0, 235.0, 300.0, 325.0]
    assert "weighted over 150 in flight" in objective.of(df).label
