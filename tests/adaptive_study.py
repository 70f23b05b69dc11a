"""A study folder of hand-made result.json files (tests of sweep.adaptive.config_file and of its
SGLang loader check, sweep.adaptive.sglang_check): per level (mean, 95% half-width) and accept
length."""

from __future__ import annotations

import json
from pathlib import Path

# name -> (role, steps, topk, {C: (mean, ci95)}, {C: accept length})
ROWS = {
    "baseline_x": ("baseline", None, None,
                   {1: (100, 2), 8: (400, 10), 32: (1000, 10), 64: (1500, 30)}, {}),
    "trial_0000": ("trial", 3, 1, {1: (140, 3), 8: (450, 10), 32: (900, 9), 64: (1400, 30)},
                   {1: 2.4, 8: 2.3, 32: 2.2, 64: 2.2}),
    "trial_0001": ("trial", 5, 1, {1: (142, 3), 8: (420, 8), 32: (850, 9), 64: (1300, 20)},
                   {1: 2.9, 8: 2.7, 32: 2.6, 64: 2.6}),
    "trial_0002": ("trial", 1, 1, {1: (120, 2), 8: (445, 12), 32: (980, 5), 64: (1480, 40)},
                   {1: 1.6, 8: 1.6, 32: 1.6, 64: 1.6}),
    "trial_0003": ("trial", 4, 4, {1: (150, 2), 8: (430, 9), 32: (800, 9), 64: (1200, 20)},
                   {1: 3.1}),
}  # fmt: skip


def metric(c: int) -> str:
    return "decode_tok_s_c1" if c == 1 else f"output_tok_s_c{c}"


def make_study(folder: Path, rows: dict = ROWS) -> Path:
    for name, (role, steps, topk, levels, accept) in rows.items():
        metrics = {}
        for c, (mean, ci) in levels.items():
            metrics[metric(c)], metrics[metric(c) + "_ci95"] = mean, ci
        metrics.update({f"accept_len_c{c}": a for c, a in accept.items()})
        params = {"speculative_num_steps": steps, "speculative_eagle_topk": topk,
                  "speculative_num_draft_tokens": None if steps is None else steps + 1}  # fmt: skip
        (folder / name).mkdir(parents=True)
        data = {"name": name, "role": role, "outcome": "ok", "metrics": metrics, "params": params}
        (folder / name / "result.json").write_text(json.dumps(data))
    return folder
