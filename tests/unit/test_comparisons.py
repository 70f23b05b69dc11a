"""A study without a baseline compares its trials with each other, run for run: each against the
reference (search.reference) and every pair that differs in one knob
(sweep/readout/comparisons.py)."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.record.results import Outcome, RunSummary, TrialResult
from harness.record.stats import paired_ratio
from sweep.readout import comparisons
from sweep.readout.console import console
from sweep.readout.ranking import Ranking
from sweep.readout.trials_table import summary_table

LEVEL = Ranking(32)

# Multi-turn chat's runs differ by ~10% (which users' histories fall out of the pool); HiCache
# adds ~7% on each run. Unpaired, the two means' intervals overlap; paired, the effect is clear.
NO_HICACHE = [618.0, 686.0, 652.0]
HICACHE = [661.0, 735.0, 699.0]
MORE_POOL = [640.0, 690.0, 655.0]  # 0.90 without HiCache: +1.5%, within the runs' noise


def trial(
    name: str, mem: float, hicache: int, outputs: list[float], ttft_p99: list[float] | None = None
) -> TrialResult:
    ttft = ttft_p99 or [9.0] * len(outputs)
    runs = [RunSummary(k, 32, 352, 0, 1000, 20.0, v, v, 0.1, None, None, ttft_p={"p99": t})
            for k, (v, t) in enumerate(zip(outputs, ttft, strict=True), 1)]  # fmt: skip
    mean = sum(outputs) / len(outputs)
    metrics = {"tok_s": 20.0, "output_tok_s_c32": mean, "output_tok_s_c32_ci95": 80.0}
    params = {"mem_fraction_static": mem, "hicache_size": hicache}
    return TrialResult(name, "trial", Outcome.OK, "sim", True, 50.0, params, metrics=metrics,
                       runs=runs)  # fmt: skip


REF = trial("trial_0000", 0.85, 0, NO_HICACHE, ttft_p99=[9.2, 11.0, 8.1])
HC = trial("trial_0001", 0.85, 48, HICACHE, ttft_p99=[2.9, 3.4, 2.6])
POOL = trial("trial_0002", 0.9, 0, MORE_POOL)
BOTH = trial("trial_0003", 0.9, 48, [p * 1.07 for p in MORE_POOL])
KNOBS = ("mem_fraction_static", "hicache_size")
REFERENCE = {"mem_fraction_static": 0.85, "hicache_size": 0}


def test_the_reference_is_the_trial_with_its_parameters():
    found = comparisons.compare([HC, POOL, REF], REFERENCE, KNOBS, LEVEL)
    assert found.reference is REF
    by_trial = {c.trial: c for c in found.vs_reference}
    assert set(by_trial) == {"trial_0001", "trial_0002"}
    hc = by_trial["trial_0001"]
    assert hc.ratio.value == pytest.approx(sum(HICACHE) / sum(NO_HICACHE))
    assert hc.ratio.pairs == 3 and 1.0 < hc.ratio.low < hc.ratio.high < 1.1
    assert hc.verdict == "higher beyond its 95% interval"
    assert hc.knob is None and hc.change == ""  # against the reference, not a one-knob pair
    assert hc.ttft_p99 is not None and hc.ttft_p99.value == pytest.approx(8.9 / 28.3)
    assert hc.as_dict()["ttft_p99_ci95_high"] < 1


def test_no_trial_matches_a_reference_that_was_not_measured():
    oom = trial("trial_0000", 0.85, 0, NO_HICACHE)
    oom.outcome = Outcome.OOM
    found = comparisons.compare([oom, HC], REFERENCE, KNOBS, LEVEL)
    assert found.reference is None and found.vs_reference == []


def test_one_knob_pairs_hold_everything_else():
    found = comparisons.compare([REF, HC, POOL, BOTH], REFERENCE, KNOBS, LEVEL)
    pairs = {(c.change, c.held): c for c in found.pairs}
    # REF-HC and POOL-BOTH differ in HiCache; REF-POOL and HC-BOTH in the pool; REF-BOTH in both.
    assert set(pairs) == {
        ("hicache_size 0 -> 48", "mem_fraction_static 0.85"),
        ("hicache_size 0 -> 48", "mem_fraction_static 0.9"),
        ("mem_fraction_static 0.85 -> 0.9", "hicache_size 0"),
        ("mem_fraction_static 0.85 -> 0.9", "hicache_size 48"),
    }
    hc = pairs[("hicache_size 0 -> 48", "mem_fraction_static 0.85")]
    assert (hc.trial, hc.against) == ("trial_0001", "trial_0000")
    expected = paired_ratio({1: 661.0, 2: 735.0, 3: 699.0}, dict(enumerate(NO_HICACHE, 1)))
    assert (hc.ratio.low, hc.ratio.high) == pytest.approx((expected.low, expected.high))


def test_unpaired_the_same_runs_would_not_resolve_hicache():
    """Why the pairing: the means' own 95% intervals overlap, so an unpaired reading says
    nothing, while the paired one measures the ~7%."""
    unpaired = paired_ratio({10 + k: v for k, v in enumerate(HICACHE)}, dict(enumerate(NO_HICACHE)))
    assert unpaired.pairs == 0 and unpaired.low < 1 < unpaired.high
    paired = comparisons.compare([REF, HC], REFERENCE, KNOBS, LEVEL).pairs[0]
    assert paired.ratio.low > 1


def test_the_verdict_lines_and_the_parent_metrics():
    found = comparisons.compare([REF, HC, POOL], REFERENCE, KNOBS, LEVEL)
    text = "\n".join(comparisons.lines(found, HC, LEVEL))
    assert "Against the reference trial_0000 (" in text
    assert "trial_0001 1.07× (95% interval" in text and "3 pairs" in text
    reference_line = text.splitlines()[0]
    assert "; TTFT p99 0.31×" in reference_line and reference_line.endswith("shorter beyond it.")
    assert "hicache_size 0 -> 48 at mem_fraction_static 0.85:" in text
    assert "higher beyond its 95% interval" in text
    assert "the interval includes 1×: not measurable with these runs" in text  # the 0.90 gain
    # HiCache's larger gain is the wait of a returning user: TTFT p99 ~0.31x, paired too
    assert "; TTFT p99 0.31× (95% interval 0." in text and "shorter beyond it" in text
    got = comparisons.metrics(HC, found.vs_reference)
    assert got["best_vs_reference"] == pytest.approx(sum(HICACHE) / sum(NO_HICACHE))
    assert 1 < got["best_vs_reference_ci95_low"] < got["best_vs_reference_ci95_high"]
    data = found.as_dict()
    assert data["reference"] == "trial_0000" and len(data["one_knob"]) == 2


def test_the_table_divides_by_the_reference_without_a_baseline():
    with console.capture() as out:
        console.print(summary_table([REF, HC], None, True, ranking=LEVEL, reference=REF))
    text = out.get()
    assert "vs ref" in text and "reference" in text
    assert f"{HC.metrics['output_tok_s_c32'] / REF.metrics['output_tok_s_c32']:.2f}×" in text


def test_a_reference_no_trial_has_is_said():
    found = comparisons.compare([HC, POOL], {"mem_fraction_static": 0.8}, KNOBS, LEVEL)
    text = "\n".join(comparisons.lines(found, HC, LEVEL))
    assert "No measured trial has the reference's parameters (mem_fraction_static=0.8)" in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+search.reference.cuda_graph_max_bs=8", r"search\.reference\.cuda_graph_max_bs: not a "),
        ("search.reference.hicache_size=[0,48]", r"search\.reference\.hicache_size=.*one value"),
    ],
)
def test_a_bad_reference_is_refused_before_anything_runs(override, message):
    from hydra import compose, initialize_config_dir

    from sweep.launch.app import CONF_DIR
    from sweep.sweeper import check_search

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=multi_turn_chat", override])
    with pytest.raises(ConfigError, match=message):
        check_search(cfg)
