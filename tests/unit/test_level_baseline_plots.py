"""Above speculation's request cap the per-level answer compares with the baseline at SGLang's
own running-request limit (sweep.study.answer.levels); the figures must say the same thing: at 64 in
flight the speedup is drawn against that baseline, and the throughput figure draws it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd

from analysis.folders import trial_row
from analysis.frame import finish, level_baseline
from analysis.levels import speedup_vs_concurrency
from analysis.plots import throughput_vs_concurrency
from harness.record.results import Outcome, TrialResult

# name, role, max_running_requests, output tok/s at 1, 32, 64
ROWS = [
    ("baseline_k", "baseline", 48, 100.0, 2400.0, 3200.0),
    ("baseline_k_uncapped", "baseline", 2048, 100.0, 2400.0, 4000.0),
    ("trial_0000", "trial", 48, 125.0, 2640.0, 3520.0),
]
SPECULATION = {"speculative_num_steps": 3, "speculative_eagle_topk": 1}


def frame(tmp_path) -> pd.DataFrame:
    rows = []
    for name, role, cap, *values in ROWS:
        folder = tmp_path / name
        folder.mkdir()
        metrics = {f"output_tok_s_c{c}": v for c, v in zip((1, 32, 64), values, strict=True)}
        metrics |= {"tok_s": values[0]}
        result = TrialResult(
            name=name,
            role=role,
            outcome=Outcome.OK,
            engine="sim",
            simulated=True,
            clock_scale=1.0,
            params={"speculative_num_draft_tokens": 4, **SPECULATION} if role == "trial" else {},
            metrics=metrics,
            effective={"max_running_requests": cap},
        )
        result.write(folder)
        rows.append(trial_row(folder, result))
    return finish(pd.DataFrame(rows))


def test_a_level_above_the_trials_cap_compares_with_the_uncapped_baseline(tmp_path):
    df = frame(tmp_path)
    assert level_baseline(df, 32)["name"] == "baseline_k"
    assert level_baseline(df, 64)["name"] == "baseline_k_uncapped"
    assert level_baseline(df[df["name"] != "baseline_k_uncapped"], 64)["name"] == "baseline_k"


def test_the_speedup_figure_reads_speculation_off_at_64_as_the_table_does(tmp_path):
    ax = speedup_vs_concurrency(frame(tmp_path)).axes[0]
    (bars,) = [c for c in ax.containers if c.get_label().startswith("trial_0000")]
    ratios = [round(float(y), 3) for y in bars.lines[0].get_ydata()][1:]  # 32 and 64
    assert ratios == [1.1, 0.88]  # 3520 / 4000 at 64, not 3520 / 3200
    notes = " ".join(t.get_text() for t in [*ax.texts, *ax.figure.texts])
    assert "at 64: vs the baseline without a request cap" in notes


def test_the_throughput_figure_draws_the_uncapped_baseline(tmp_path):
    ax = throughput_vs_concurrency(frame(tmp_path)).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "baseline at SGLang's own running-request limit (no cap)" in labels
