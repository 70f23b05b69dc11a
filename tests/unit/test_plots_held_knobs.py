"""A knob every trial ran at one value is drawn at that value and said to be held: no jitter
invents a spread (negative host memory), and the memory map says there is nothing to map."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.collections import PathCollection

from analysis.plots import held_at, oom_map, parameter_effects
from tests.unit.test_capacity_plots import frame

HELD = [(0.85, 0, "ok", 116_171, 400.0 + 10 * i, 0.55, 1.0) for i in range(4)]


def offsets(ax) -> np.ndarray:
    return np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])


def texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


def test_held_knobs_are_drawn_where_they_were_and_named(tmp_path):
    df = frame(tmp_path, HELD)
    assert held_at(df, "mem_fraction_static") == 0.85 and held_at(df, "hicache_size") == 0
    fig = parameter_effects(df)
    panels = {ax.get_xlabel().split()[0]: ax for ax in fig.axes if ax.get_xlabel()}
    mem, hicache = panels["mem_fraction_static"], panels["hicache_size"]
    assert set(offsets(mem)[:, 0]) == {0.85} and set(offsets(hicache)[:, 0]) == {0.0}
    assert "held at 0.85 in every trial" in texts(mem)
    memory = oom_map(df).axes[0]
    assert set(map(tuple, offsets(memory))) == {(0.85, 0.0)}
    assert "no memory to map" in texts(memory)


def test_searched_knobs_are_not_called_held(tmp_path):
    df = frame(tmp_path)  # four fractions, two HiCache sizes
    assert held_at(df, "mem_fraction_static") is None
    assert "no memory to map" not in texts(oom_map(df).axes[0])


def test_a_study_without_speculation_draws_only_the_knobs_it_set(tmp_path):
    fig = parameter_effects(frame(tmp_path))  # capacity trials: memory knobs, no drafter
    drawn = {ax.get_xlabel().split()[0] for ax in fig.axes if ax.get_xlabel()}
    assert drawn == {"mem_fraction_static", "hicache_size"}
    assert "speculative_num_steps" in fig._suptitle.get_text()  # named as left out, and why
    assert "no speculation" in fig._suptitle.get_text()


def test_a_speculative_study_draws_every_knob(tmp_path):
    df = frame(tmp_path)
    for name, value in (
        ("speculative_num_steps", 3),
        ("speculative_eagle_topk", 1),
        ("speculative_num_draft_tokens", 4),
    ):
        df[name] = value
    fig = parameter_effects(df)
    drawn = {ax.get_xlabel().split()[0] for ax in fig.axes if ax.get_xlabel()}
    assert len(drawn) == 5 and "no speculation" not in fig._suptitle.get_text()
