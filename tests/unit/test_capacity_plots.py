"""The capacity figures (issue 17): throughput vs KV capacity and cache hit rate vs HiCache size,
drawn from the memory each trial recorded, and in the report only when the study has that data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
from matplotlib.collections import PathCollection

from analysis.capacity import cache_hit_rate_vs_hicache, throughput_vs_kv_capacity
from analysis.figures import why_not
from analysis.folders import trial_row
from analysis.frame import finish
from analysis.report import write_report
from harness.record.results import Outcome, TrialResult

C = 150
# (mem_fraction_static, hicache_size, outcome, kv pool, tok/s at C, hit rate, KV-bound)
TRIALS = [
    (0.85, 0, "ok", 116_171, 400.0, 0.55, 1.0),
    (0.88, 0, "ok", 140_000, 470.0, 0.58, 1.0),
    (0.88, 48, "ok", 159_277, 600.0, 0.81, 1.0),
    (0.91, 48, "ok", 175_000, 650.0, 0.83, 0.0),
    (0.93, 0, "oom", None, None, None, None),
]


def frame(tmp_path, trials=TRIALS, memory=True):
    rows = []
    for i, (mem, hicache, outcome, pool, tok_s, hits, bound) in enumerate(trials):
        folder = tmp_path / f"trial_{i:04d}"
        folder.mkdir(parents=True)
        metrics = {}
        if tok_s is not None:
            metrics = {"tok_s": tok_s / 35, f"output_tok_s_c{C}": tok_s}
            metrics[f"output_tok_s_c{C}_ci95"] = 0.03 * tok_s
        if memory and pool is not None:
            metrics |= {"kv_pool_tokens": pool, f"cache_hit_rate_c{C}": hits}
            metrics |= {f"kv_bound_c{C}": bound, "cache_hit_rate": hits, "kv_bound": bound}
        result = TrialResult(
            name=folder.name,
            role="trial",
            outcome=Outcome(outcome),
            engine="sim",
            simulated=True,
            clock_scale=1.0,
            params={"mem_fraction_static": mem, "hicache_size": hicache},
            metrics=metrics,
        )
        result.write(folder)
        rows.append(trial_row(folder, result))
    return finish(pd.DataFrame(rows))


def test_throughput_vs_kv_capacity_plots_each_ok_trial_at_its_pool(tmp_path):
    fig = throughput_vs_kv_capacity(frame(tmp_path))
    ax = fig.axes[0]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    points = sorted((float(x), float(y)) for c in scatters for x, y in c.get_offsets())
    assert points == [(116_171, 400.0), (140_000, 470.0), (159_277, 600.0), (175_000, 650.0)]
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert labels == {
        "HiCache 0 GB, KV-bound",
        "HiCache 48 GB, KV-bound",
        "HiCache 48 GB, not KV-bound",
    }
    assert f"at {C} in flight" in ax.get_ylabel()
    assert "SIMULATED" in ax.get_title()
    assert any("ran out of memory" in t.get_text() for t in ax.texts)  # the 0.93 OOM, said


def test_cache_hit_rate_vs_hicache_shows_the_mean_per_size(tmp_path):
    fig = cache_hit_rate_vs_hicache(frame(tmp_path))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0 GB", "48 GB"]
    means = sorted(t.get_text() for t in ax.texts)
    assert means == ["mean 56.5%", "mean 82.0%"]


CAPACITY = ("throughput_vs_kv_capacity", "cache_hit_rate_vs_hicache")


def test_the_report_has_the_capacity_figures_only_with_the_data(tmp_path):
    df = frame(tmp_path / "with")
    assert [why_not(name, df) for name in CAPACITY] == [None, None]
    index = write_report(df, tmp_path / "report", "test")
    for name in CAPACITY:
        assert (tmp_path / "report" / f"{name}.png").stat().st_size > 0
        assert f'src="{name}.png"' in index.read_text()
    without = frame(tmp_path / "without", memory=False)  # a study from before memory records
    assert why_not("throughput_vs_kv_capacity", without) == "no trial recorded its KV pool"
    assert why_not("cache_hit_rate_vs_hicache", without) == "no trial recorded a cache hit rate"
    assert throughput_vs_kv_capacity(without) is None
    single = frame(tmp_path / "single", [(0.85, 0, "ok", 116_171, None, None, None)])
    for name in CAPACITY:  # no level above 1: capacity did not decide anything
        assert "no level above 1 in flight" in why_not(name, single)


def test_one_pool_or_one_hicache_size_is_left_out_with_its_value(tmp_path):
    one = [(0.85, 0, "ok", 116_171, 400.0 + 10 * i, 0.55, 1.0) for i in range(3)]
    df = frame(tmp_path, one)
    assert why_not("throughput_vs_kv_capacity", df) == (
        "every trial ran one KV pool (116,171 tokens): nothing to set it against"
    )
    assert why_not("cache_hit_rate_vs_hicache", df) == (
        "every trial ran hicache_size 0: one column, nothing to compare"
    )
    assert cache_hit_rate_vs_hicache(df) is None and throughput_vs_kv_capacity(df) is None
    index = write_report(df, tmp_path / "report", "test").read_text()
    assert "Left out: every trial ran one KV pool (116,171 tokens)" in index
    assert not (tmp_path / "report" / "throughput_vs_kv_capacity.png").exists()
