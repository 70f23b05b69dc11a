"""The report shows only what was measured: a figure, column or table with nothing to show is left
out with one line saying why, where it would be; every note on a figure is true of its data
(each built here where it holds and where it does not); the page says no `None` and no record
key (`equal_caps`, `host_overloaded`, `tok_s_ci95`); identical curves are drawn once with every
trial named; numbers carry the digits they are worth."""

from __future__ import annotations

import html
import json
import re

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from analysis import notes
from analysis.acceptance import accept_at_least, accept_by_position
from analysis.figures import FIGURES, TITLES, why_not
from analysis.folders import trial_row
from analysis.frame import finish
from analysis.levels import speedup_vs_concurrency
from analysis.report import write_report
from harness.record.precision import meaningful, step
from harness.record.results import Outcome, StepHistogram, TrialResult

BASE = {"tok_s": 88.87113249, "tok_s_ci95": 1.18449}
CURVE = [1.98, 1.92, 1.90]


def spec(steps: int, topk: int = 1) -> dict:
    draft = steps + 1 if topk == 1 else steps + 2
    return {
        "speculative_algorithm": "EAGLE3",
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft,
        "mem_fraction_static": 0.85,
        "hicache_size": 0,
    }


def result(name, tok_s, params=None, role="trial", ci=1.7, warnings=(), curve=(), levels=None):
    """A finished trial or baseline; levels: {C: (output tok/s, ci)} above 1 in flight."""
    metrics = {"tok_s": tok_s, "tok_s_ci95": ci, "decode_tok_s_c1": tok_s}
    metrics |= {"decode_tok_s_c1_ci95": ci, "output_tok_s_c1": tok_s, "output_tok_s_c1_ci95": ci}
    if role == "trial":
        metrics["accept_len"] = 1.987654
    if curve:
        metrics["accept_steps_c1"] = 500.0  # the verify steps P(>=k) was counted over
    for c, (value, spread) in (levels or {}).items():
        metrics |= {f"output_tok_s_c{c}": value, f"output_tok_s_c{c}_ci95": spread}
    return TrialResult(
        name=name, role=role, outcome=Outcome.OK, engine="sim", simulated=True, clock_scale=1.0,
        params=params or {}, metrics=metrics, warnings=list(warnings),
        accept_by_window=list(curve),
        step_histograms=[StepHistogram(1, [round(c - 1, 3) for c in curve[:2]], steps=500)]
        if curve else [],
    )  # fmt: skip


def frame(tmp_path, results) -> pd.DataFrame:
    rows = []
    for r in results:
        folder = tmp_path / "study" / r.name
        folder.mkdir(parents=True)
        r.write(folder)
        rows.append(trial_row(folder, r))
    return finish(pd.DataFrame(rows))


def default_like(tmp_path) -> pd.DataFrame:
    """The default sweep's shape: one level, the memory knobs held, tied trials, a host warning,
    three trials with one acceptance curve."""
    return frame(
        tmp_path,
        [
            result("baseline_x", BASE["tok_s"], role="baseline", ci=BASE["tok_s_ci95"]),
            result("trial_0000", 80.3, spec(2), warnings=["host_overloaded"], curve=CURVE),
            result("trial_0001", 80.2, spec(2, 2), curve=CURVE),
            result("trial_0002", 79.0, spec(3, 2), warnings=["screened"], curve=[2.1, 2.0, 1.9]),
        ],
    )


def visible_text(page: str) -> str:
    """What a reader sees: no tags, no attributes (file names in src=), no style."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


# --- figures with nothing to show: left out, the line where the figure would be ----------------


def test_a_figure_with_nothing_to_show_is_a_line_under_its_heading(tmp_path):
    df = default_like(tmp_path)
    index = write_report(df, tmp_path / "report", "test")
    page = index.read_text()
    for name in ("oom_map", "throughput_vs_concurrency", "speedup_vs_concurrency"):
        why = why_not(name, df)
        assert why and not (tmp_path / "report" / f"{name}.png").exists()
        # under the figure's own heading, in words, not a list at the end
        assert f"<h2>{TITLES[name]}</h2>\n<p class='left-out'>Left out: {html.escape(why)}." in page
    assert "one concurrency level measured (1 in flight)" in why_not(
        "throughput_vs_concurrency", df
    )
    for name in ("speed_vs_baseline", "accept_vs_speed", "parameter_effects", "history"):
        assert why_not(name, df) is None
        assert f'src="{name}.png"' in page


def test_every_figure_left_out_returns_none_and_every_drawn_one_a_figure(tmp_path):
    df = default_like(tmp_path)
    for name, (make, reason) in FIGURES.items():
        assert (make(df) is None) == (reason(df) is not None), name


def test_a_second_level_brings_the_concurrency_figures_back(tmp_path):
    df = frame(
        tmp_path,
        [
            result("baseline_x", 88.9, role="baseline", levels={8: (600.0, 6.0)}),
            result("trial_0000", 80.3, spec(2), levels={8: (700.0, 7.0)}),
            result("trial_0001", 79.0, spec(3), levels={8: (650.0, 7.0)}),
        ],
    )
    assert why_not("throughput_vs_concurrency", df) is None
    assert why_not("speedup_vs_concurrency", df) is None


def test_a_history_of_one_trial_and_a_lone_accept_length_are_left_out(tmp_path):
    df = frame(tmp_path, [result("baseline_x", 88.9, role="baseline"), result("t", 80.0, spec(2))])
    assert why_not("history", df) == "one trial ran: a history needs two"
    assert why_not("accept_vs_speed", df) == (
        "one trial measured an accept length: nothing to set it against"
    )


# --- notes true of their data --------------------------------------------------------------------


def levels_row(trial: str, low: float, high: float, c: int = 8) -> dict:
    return {"concurrency": c, "best": {"trial": trial, "low": low, "high": high}}


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ([levels_row("trial_0000", 1.15, 1.18)], "paired interval is narrower at 8 in flight"),
        ([levels_row("trial_0000", 1.0, 1.4)], "paired interval is wider at 8 in flight"),
        ([], None),  # no table beside the figure (a notebook): no comparison claimed
        ([levels_row("trial_0009", 1.0, 1.4)], None),  # the table's best is not drawn
    ],
)
def test_the_speedup_note_says_which_interval_is_narrower_as_the_data_has_it(tmp_path, table, says):
    df = frame(
        tmp_path,
        [
            result("baseline_x", 88.9, role="baseline", levels={8: (600.0, 6.0)}),
            result("trial_0000", 80.3, spec(2), levels={8: (700.0, 7.0)}),
        ],
    )
    # The bar at 8: 700/600 = 1.167 ± 1.167 * hypot(0.01, 0.01) = ± 0.0165, width 0.033.
    df.attrs["levels"] = table
    fig = speedup_vs_concurrency(df)
    text = " ".join(t.get_text() for t in fig.texts)
    assert "bars: 95%, unpaired" in text
    if says:
        assert says in text
    else:
        assert "paired interval is" not in text


def test_the_interval_note_names_each_level_as_it_is():
    bars = {("a", 1): 0.04, ("a", 64): 0.04}
    note = notes.interval_note(bars, [levels_row("a", 0.9, 0.92, 1), levels_row("a", 0.9, 1.0, 64)])
    assert "narrower at 1 in flight and wider at 64 in flight" in note


def test_below_one_is_labelled_only_where_the_axis_shows_below_one(tmp_path):
    df = frame(
        tmp_path,
        [
            result("baseline_x", 88.9, role="baseline", levels={8: (600.0, 6.0)}),
            result("trial_0000", 80.3, spec(2), levels={8: (700.0, 7.0)}),
        ],
    )
    ax = speedup_vs_concurrency(df).axes[0]
    bottom, top = ax.get_ylim()
    assert bottom < 1.0 < top  # the line the label is about is on the axis, with room below
    assert "below 1.0: speculation loses" in [t.get_text() for t in ax.texts]


@pytest.mark.parametrize(
    ("outcomes", "says"),
    [
        (["oom"], "1 trial ran out of memory: no pool to plot"),
        (["oom", "predicted_oom"], "1 trial ran out of memory, 1 predicted to (not launched)"),
        (["predicted_oom"], "1 trial predicted to run out of memory (not launched)"),
        (["ok"], None),
    ],
)
def test_the_out_of_memory_note_counts_what_ran_out_and_what_was_predicted(outcomes, says):
    rows = pd.DataFrame({"outcome": outcomes})
    note = notes.out_of_memory(rows)
    assert note == says or (says and note.startswith(says))


def test_the_speed_figure_annotates_each_bar_with_its_own_ratio(tmp_path):
    from analysis.plots import speed_vs_baseline

    df = default_like(tmp_path)
    ax = speed_vs_baseline(df).axes[0]
    ratios = [t.get_text() for t in ax.texts]
    assert ratios == [f"{v / BASE['tok_s']:.2f}×" for v in (80.3, 80.2, 79.0)]
    no_base = df[df["role"] != "baseline"]
    ax = speed_vs_baseline(no_base).axes[0]
    assert not ax.texts and "(no baseline measured)" in ax.get_title()


# --- identical curves: each trial can be seen ----------------------------------------------------


def test_identical_curves_are_one_line_naming_every_trial(tmp_path):
    df = default_like(tmp_path)
    ax = accept_by_position(df).axes[0]
    lines = ax.get_lines()
    assert [list(line.get_ydata()) for line in lines] == [CURVE, [2.1, 2.0, 1.9]]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "trial_0000" in legend[0] and "trial_0001" in legend[0]
    assert "2 identical curves, drawn as one" in legend[0]
    assert "identical" not in legend[1]  # a curve of its own says nothing of the kind
    ax = accept_at_least(df).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(ax.get_lines()) == 2 and "trial_0000" in legend[0] and "trial_0001" in legend[0]
    assert "500 steps" in legend[1] and "500 steps" not in legend[0]


def test_curves_apart_by_more_than_the_figure_resolves_stay_apart():
    groups = notes.coinciding([("a", [1.0, 2.0]), ("b", [1.0, 2.002]), ("c", [1.0, 2.0001])])
    assert [labels for labels, _ in groups] == [["a", "c"], ["b"]]
    assert [labels for labels, _ in notes.coinciding([("a", [1]), ("b", [2]), ("c", [1])], 1)] == [
        ["a", "c"]
    ]


# --- the page in words ---------------------------------------------------------------------------

INTERNAL = ("None", "equal_caps", "host_overloaded", "baseline_kind", "tok_s", "accept_len", "nan")
# Names a reader does meet: SGLang's flags as the user types them, trial and folder names.
ALLOWED = re.compile(
    r"^(speculative_\w+|mem_fraction_static|hicache_size|trial_\d+|baseline_\w+|search\.\w+)$"
)


def study_with_records(tmp_path, n_trials: int = 12, spread: float = 1.0) -> tuple:
    base = result("baseline_x", 88.9, role="baseline")
    trials = [
        result(f"trial_{i:04d}", 60.0 + spread * i, spec(2 + i % 3, 1 + i % 2),
               warnings=["host_overloaded"] if i % 2 else [], curve=CURVE)
        for i in range(n_trials)
    ]  # fmt: skip
    df = frame(tmp_path, [base, *trials])
    folder = tmp_path / "study"
    row = {
        "concurrency": 1, "metric": "decode_tok_s", "baseline": 88.871, "recommend": "trial_0011",
        "baseline_kind": "equal_caps", "equal_caps": None, "excluded": [],
        "best": {"trial": "trial_0011", "config": "steps=3 topk=2", "value": 71.0, "ci95": 1.7,
                 "speedup": 0.80, "low": 0.78, "high": 0.82},
    }  # fmt: skip
    (folder / "levels-20260101-000000.json").write_text(json.dumps([row]))
    shares = {"speculative_num_steps": 0.62, "speculative_eagle_topk": 0.38}
    weights = {"single-stream tok/s": shares}
    (folder / "importances.json").write_text(json.dumps(weights))
    return df, folder


def test_the_rendered_report_says_no_none_and_no_record_key(tmp_path):
    df, folder = study_with_records(tmp_path)
    text = visible_text(write_report(df, tmp_path / "report", "origin", None, [folder]).read_text())
    for word in INTERNAL:
        assert not re.search(rf"\b{re.escape(word)}\b", text), word
    keys = {w for w in re.findall(r"\b[a-z]+(?:_[a-z0-9]+)+\b", text) if not ALLOWED.match(w)}
    assert keys == set()
    assert "host busy while it ran" in text and "stopped early" not in text
    # The columns with one value at every level are a line each, not a column of "-" or None.
    assert "Left out: compared with: the study's baseline (the trials' request cap)" in text
    assert "Left out: speedup at equal caps: no level above the trials' request cap" in text
    assert "0.80" in text and "0.78–0.82×" in text


def test_the_importances_have_no_header_row_of_their_own_and_name_what_they_leave_out(tmp_path):
    df, folder = study_with_records(tmp_path)
    page = write_report(df, tmp_path / "report", "origin", None, [folder]).read_text()
    section = page.split("Parameter importances")[1].split("<h2>")[0]
    assert section.count("<tr") == 3  # the header and a row per ranked parameter
    assert "<th>parameter</th>" in section and "share of single-stream tok/s" in section
    assert "speculative_num_draft_tokens: not ranked" in visible_text(section)


@pytest.mark.parametrize(
    ("n_trials", "spread", "says"),
    [
        (9, 1.0, "fitted on at most 9 measured trials; under 10"),
        (12, 0.05, "differ by less than their 95% intervals"),
    ],
)
def test_importances_are_left_out_on_too_few_or_indistinguishable_trials(
    tmp_path, n_trials, spread, says
):
    df, folder = study_with_records(tmp_path, n_trials, spread)
    page = write_report(df, tmp_path / "report", "origin", None, [folder]).read_text()
    section = visible_text(page.split("Parameter importances")[1].split("<h2>")[0])
    assert says in section and "speculative_num_steps" not in section
    assert not (tmp_path / "report" / "importances.csv").exists()


def test_the_trials_table_shows_each_number_at_its_digits(tmp_path):
    df = default_like(tmp_path)
    text = visible_text(write_report(df, tmp_path / "report", "test").read_text())
    assert "88.9" in text and "88.87" not in text  # tok/s to 0.1
    assert "1.99" in text and "1.987" not in text  # accept length to 0.01
    assert "Left out: inferred from: no trial has one." in text


# --- the digits each metric is worth -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("tok_s", 88.87113249, 88.9),
        ("run.output_tok_s_c64", 3212.04, 3212.0),
        ("tok_s_ci95", 1.18449, 1.2),
        ("accept_len", 1.987654, 1.99),
        ("accept_len_by_window", 1.98046, 1.98),
        ("speedup_vs_baseline", 0.90312, 0.903),
        ("best_speedup_c1_ci95_low", 0.87449, 0.874),
        ("accept_at_least_c1", 0.57712, 0.577),
        ("tok_s_cv", 0.01234, 0.012),  # a ratio, though its name says tok_s
        ("itl_ms_p99_c1", 12.34567, 12.3),
        ("startup_s", 121.23456, 121.23),
        ("baseline_drift_pct", -0.01234, -0.01),
        ("kv_pool_tokens", 116170.0, 116170.0),  # a count is kept whole
        ("host_load_1m", 3.456789, 3.457),  # no rule: four significant digits
        ("queue_mean", 0.000123456, 0.0001235),
    ],
)
def test_each_metric_is_rounded_to_the_digits_it_is_worth(name, value, shown):
    assert meaningful(name, value) == shown


def test_rounding_changes_a_value_by_less_than_half_its_unit():
    for name in ("tok_s", "accept_len", "speedup_vs_baseline", "itl_ms_p50_c8"):
        for value in (0.123456, 7.654321, 88.87113249, 3211.98765):
            assert abs(meaningful(name, value) - value) <= step(name) / 2 + 1e-12
