"""Acceptance by output position in the analysis (issue 15): result.json's accept_by_window, a
list per trial, is plotted for the best configurations and lands in the report."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from analysis.acceptance import accept_by_position
from analysis.figures import FIGURES, why_not
from analysis.folders import trial_row
from analysis.frame import finish
from analysis.report import write_report
from harness.record.results import Outcome, TrialResult


def frame(tmp_path, curves):
    rows = []
    for i, (tok_s, curve) in enumerate(curves):
        folder = tmp_path / f"trial_{i:04d}"
        folder.mkdir()
        params = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}
        params |= {"speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
        result = TrialResult(
            name=folder.name,
            role="trial",
            outcome=Outcome.OK,
            engine="sim",
            simulated=True,
            clock_scale=1.0,
            params=params,
            metrics={"tok_s": tok_s, "accept_len": 3.0},
            accept_by_window=curve,
        )
        result.write(folder)
        rows.append(trial_row(folder, result))
    return finish(pd.DataFrame(rows))


def test_the_best_configurations_acceptance_curves_are_plotted(tmp_path):
    df = frame(tmp_path, [(90.0, [3.2, 3.0, 2.7]), (80.0, []), (70.0, [2.9, 2.8]), (60.0, [2.0])])
    fig = accept_by_position(df, top=2)
    lines = fig.axes[0].get_lines()
    # The two fastest trials with a curve (the one without is skipped), positions 0, 256, ...
    assert [list(line.get_ydata()) for line in lines] == [[3.2, 3.0, 2.7], [2.9, 2.8]]
    assert list(lines[0].get_xdata()) == [0, 256, 512]
    assert "accept_by_position" in FIGURES
    index = write_report(df, tmp_path / "report", "test")
    assert (tmp_path / "report" / "accept_by_position.png").stat().st_size > 0
    assert 'src="accept_by_position.png"' in index.read_text()


def test_without_curves_there_is_no_figure_and_the_report_says_why(tmp_path):
    df = frame(tmp_path, [(90.0, [])])
    assert accept_by_position(df) is None
    assert "without speculation, or server.stream_interval above 1" in why_not(
        "accept_by_position", df
    )
