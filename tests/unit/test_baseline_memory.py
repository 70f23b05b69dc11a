"""The baseline never leaves --mem-fraction-static to SGLang (sweep/study/loop/baseline.py)."""

from __future__ import annotations

from types import SimpleNamespace

from sweep.config.fraction import baseline_mem_fraction
from sweep.config.schema import ParamConfig
from sweep.study.loop.baseline import baseline_overrides

SPACE = {"mem_fraction_static": ParamConfig(type="float", low=0.82, high=0.94, step=0.01)}


def search(reference=None, space=None, enqueue=()):
    return SimpleNamespace(reference=reference or {}, space=space or {}, enqueue=list(enqueue))


def server(fraction=None):
    return SimpleNamespace(mem_fraction_static=fraction)


def test_the_reference_wins_then_the_lower_quarter_then_the_first_enqueued():
    ref = {"mem_fraction_static": 0.88}
    assert baseline_mem_fraction(search(ref, SPACE), server()) == 0.88
    # the lower quarter of 0.82-0.94, where the pinned fraction starts; an enqueued 0.93 (an
    # OOM probe) does not decide the baseline's memory
    enqueued = [{"mem_fraction_static": 0.93}]
    assert baseline_mem_fraction(search(None, SPACE, enqueued), server()) == 0.85
    assert baseline_mem_fraction(search(None, None, enqueued), server()) == 0.93
    assert baseline_mem_fraction(search(), server()) is None
    assert baseline_mem_fraction(search(ref, SPACE), server(0.8)) is None  # set already


def test_overrides_add_the_fraction_unless_the_user_gave_one():
    assert "server.mem_fraction_static=0.85" in baseline_overrides([], "b", 0.85)
    mine = baseline_overrides(["server.mem_fraction_static=0.8"], "b", 0.85)
    assert [o for o in mine if o.startswith("server.mem_fraction_static")] == [
        "server.mem_fraction_static=0.8"
    ]
