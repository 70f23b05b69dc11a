"""The --mem-fraction-static a launch runs at when its config leaves it unset.

SGLang's own default on a multimodal or MLA model can leave no KV cache at all (0.5.23
`arg_groups/memory_hook.py`; harness.sglang.memory): Kimi-K2.5 on the seeds' 96 GB box gets
0.766, which holds about 2k tokens. So no launch of the sweep leaves the flag to SGLang: the
baseline (sweep.study.loop.baseline) and a single `python sweep.py` run take the fraction
named here.
"""

from __future__ import annotations

FRACTION = "mem_fraction_static"


def baseline_mem_fraction(search, server) -> float | None:
    """The fraction the baseline runs at, so it never leaves --mem-fraction-static to SGLang
    (whose own default on a multimodal or MLA model can leave no KV cache: harness.sglang.memory):
    search.reference's when it names one, else the lower quarter of the searched range (where
    the pinned fraction starts, sweep.study.search.memory: 0.85 for 0.82-0.94), else the first
    enqueued trial's. None: server.mem_fraction_static is set already, or nothing names a
    fraction (preflight warns)."""
    if server.mem_fraction_static is not None:
        return None  # the composed config already sets it
    if search.reference and search.reference.get(FRACTION) is not None:
        return float(search.reference[FRACTION])
    param = search.space.get(FRACTION) if search.space else None
    if param is not None:
        if param.type == "categorical":
            grid = sorted(float(c) for c in param.choices if c is not None)
        elif param.step:
            n = round((param.high - param.low) / param.step)
            grid = [round(param.low + i * param.step, 6) for i in range(n + 1)]
        else:
            grid = [round(param.low + i * (param.high - param.low) / 12, 6) for i in range(13)]
        if grid:
            return grid[len(grid) // 4]
    for values in search.enqueue:
        if values and values.get(FRACTION) is not None:
            return float(values[FRACTION])
    return None
