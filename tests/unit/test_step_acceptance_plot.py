"""P(>=k) in the analysis (issue 28): result.json's step_histograms become a list column per level
(accept_at_least_c<C>, as MLflow's stepped metric reads back), drawn by depth for the best
configurations, a panel per level, and land in the report; a refused level draws nothing."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from analysis.acceptance import accept_at_least
from analysis.figures import FIGURES, why_not
from analysis.folders import trial_row
from analysis.frame import finish
from analysis.report import write_report
from harness.record.results import Outcome, StepHistogram, TrialResult


def frame(tmp_path, trials):
    """One row per (tok/s, steps, {level: P(>=k) or a refusal})."""
    rows = []
    for i, (tok_s, steps, levels) in enumerate(trials):
        folder = tmp_path / f"trial_{i:04d}"
        folder.mkdir()
        params = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": steps}
        params |= {"speculative_eagle_topk": 1, "speculative_num_draft_tokens": steps + 1}
        hists = [
            StepHistogram(c, refused=v) if isinstance(v, str) else StepHistogram(c, v, steps=500)
            for c, v in levels.items()
        ]
        result = TrialResult(
            name=folder.name, role="trial", outcome=Outcome.OK, engine="sim", simulated=True,
            clock_scale=1.0, params=params, step_histograms=hists,
            metrics={"tok_s": tok_s, **{f"accept_steps_c{h.concurrency}": 500.0 for h in hists
                                        if h.at_least}},
        )  # fmt: skip
        result.write(folder)
        rows.append(trial_row(folder, result))
    return finish(pd.DataFrame(rows))


def test_the_best_configurations_p_at_least_k_is_drawn_by_depth_per_level(tmp_path):
    chain5 = [0.7, 0.46, 0.28, 0.16, 0.09]
    df = frame(
        tmp_path,
        [
            (90.0, 5, {1: chain5, 8: [0.66, 0.41, 0.24, 0.13, 0.07]}),
            (80.0, 3, {1: [0.7, 0.45, 0.27], 8: "--stream-interval 4: ..."}),
            (70.0, 2, {1: "1.5% of the verify steps arrived merged ..."}),
        ],
    )
    assert df.loc[0, "accept_at_least_c1"] == chain5  # a list, as MLflow's steps read back
    fig = accept_at_least(df)
    left, right = fig.axes
    assert [ax.get_title() for ax in (left, right)] == ["1 in flight", "8 in flight"]
    # The refused levels draw nothing: two lines at 1 in flight, one at 8.
    assert [list(line.get_ydata()) for line in left.get_lines()] == [chain5, [0.7, 0.45, 0.27]]
    assert list(left.get_lines()[0].get_xdata()) == [1, 2, 3, 4, 5]
    assert len(right.get_lines()) == 1
    label = left.get_legend().get_texts()[0].get_text()
    assert label.startswith("trial_0000 5/1/6") and "τ 2.69" in label and "500 steps" in label
    assert "Acceptance by draft depth" in fig._suptitle.get_text()
    assert "accept_at_least" in FIGURES
    index = write_report(df, tmp_path / "report", "test")
    assert (tmp_path / "report" / "accept_at_least.png").stat().st_size > 10_000
    assert 'src="accept_at_least.png"' in index.read_text()


@pytest.mark.parametrize("levels", [{}, {1: "--stream-interval 4: ..."}])
def test_without_p_at_least_k_there_is_no_figure_and_the_report_says_why(tmp_path, levels):
    df = frame(tmp_path, [(90.0, 3, levels)])
    assert accept_at_least(df) is None
    assert "step_histograms says why" in why_not("accept_at_least", df)
