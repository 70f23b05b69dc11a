"""A knob every trial ran at one value shows no effect: it gets no panel (a single strip) and is
named with its value in the title; the memory map with both memory knobs held is left out with
the line that says so (a single dot), and comes back as soon as one of them varies."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.collections import PathCollection

from analysis.figures import why_not
from analysis.frame import held_at
from analysis.plots import oom_map, parameter_effects
from tests.unit.test_capacity_plots import frame

HELD = [(0.85, 0, "ok", 116_171, 400.0 + 10 * i, 0.55, 1.0) for i in range(4)]
SPECULATIVE = {"speculative_num_steps": [2, 3, 3, 4], "speculative_eagle_topk": [1, 1, 2, 2]}


def offsets(ax) -> np.ndarray:
    return np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])


def panels(fig) -> set[str]:
    return {ax.get_xlabel().split()[0] for ax in fig.axes if ax.get_xlabel()}


def test_held_knobs_get_no_panel_and_are_named_with_their_value(tmp_path):
    df = frame(tmp_path, HELD)
    for name, values in SPECULATIVE.items():
        df[name] = values
    df["speculative_num_draft_tokens"] = 4
    assert held_at(df, "mem_fraction_static") == 0.85 and held_at(df, "hicache_size") == 0
    fig = parameter_effects(df)
    assert panels(fig) == {"speculative_num_steps", "speculative_eagle_topk"}
    title = fig._suptitle.get_text()
    assert "one value in every trial, no panel: speculative_num_draft_tokens 4, " in title
    assert "mem_fraction_static 0.85, hicache_size 0" in title
    assert "no speculation" not in title  # every speculative knob was set
    steps = next(ax for ax in fig.axes if ax.get_xlabel() == "speculative_num_steps")
    assert set(offsets(steps)[:, 0]) == {2.0, 3.0, 4.0}  # where they ran, no jitter


def test_with_both_memory_knobs_held_the_memory_map_is_left_out_and_says_why(tmp_path):
    df = frame(tmp_path, HELD)
    assert oom_map(df) is None
    assert why_not("oom_map", df) == (
        "every trial ran mem_fraction_static 0.85 and hicache_size 0: no memory boundary to "
        "map (search.memory=sample searches them)"
    )
    # No knob varied at all: the parameter figure has nothing to show either.
    assert parameter_effects(df) is None
    assert "every trial ran the same values" in why_not("parameter_effects", df)


def test_searched_memory_knobs_are_mapped(tmp_path):
    df = frame(tmp_path)  # four fractions, two HiCache sizes
    assert held_at(df, "mem_fraction_static") is None and why_not("oom_map", df) is None
    memory = oom_map(df).axes[0]
    assert len({tuple(p) for p in offsets(memory)}) == 5  # every trial where it ran
    assert not memory.texts


def test_a_study_without_speculation_draws_only_the_knobs_it_set(tmp_path):
    fig = parameter_effects(frame(tmp_path))  # capacity trials: memory knobs, no drafter
    assert panels(fig) == {"mem_fraction_static", "hicache_size"}
    title = fig._suptitle.get_text()
    assert "no trial set speculative_num_steps" in title and "no speculation" in title


def test_no_speculation_is_said_only_when_the_speculative_knobs_are_the_unset_ones(tmp_path):
    df = frame(tmp_path)
    for name, value in (("speculative_num_steps", 3), ("speculative_eagle_topk", 1)):
        df[name] = value
    title = parameter_effects(df)._suptitle.get_text()
    assert "no trial set speculative_num_draft_tokens" in title
    assert "no speculation" not in title  # steps and topk were set: it speculated
