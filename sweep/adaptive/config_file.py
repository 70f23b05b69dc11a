"""A study's per-level measurements -> SGLang's `--speculative-adaptive-config` file.

SGLang 0.5.23's adaptive policy (srt/speculative/adaptive_spec_params.py; harness.sim.model.adaptive
reproduces it) keeps one slot per batch-size threshold; each slot moves its speculative steps
between its `candidate_steps` by an EMA of the accepted drafts. Its built-in default
(harness.sglang.adaptive.ADAPTIVE_DEFAULT_CONFIG) is a guess for a generic model; the file written
here comes from the study:

- thresholds: the measured concurrency levels;
- at each level, the topk = 1 trials (SGLang adapts only chains: adaptive_unsupported_reason)
  ranked by the level's metric (`level_metric`); the candidates are the steps whose 95%
  interval overlaps the best one's (statistically tied with it), plus 0 when the baseline is
  tied with the best too; only 0 when no chain beats the baseline's lower bound (speculation
  loses there);
- the EMA knobs at SGLang's defaults, and the hysteresis at SGLang's default for that slot
  unless the measured accept length at the best steps would make the policy leave them: then
  the threshold is moved to hold the best with a margin of `HOLD_MARGIN` accepted drafts
  (the reason is written in the file's "specsweep" entry, which SGLang's loader skips: it reads
  only integer-string keys as slots, adaptive_spec_params.py:117-119).

`write_config` writes it as adaptive_config.json in the study folder and checks it with SGLang's
own loader where SGLang's environment is found (sweep.adaptive.sglang_check); a multi-level sweep
does so at its end (`after_sweep`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from harness.sglang.adaptive import ADAPTIVE_DEFAULT_CONFIG, ADAPTIVE_KNOB_DEFAULTS, adaptive_slots
from sweep.adaptive.sglang_check import compat_python, disagreements, validate_with_sglang
from sweep.readout.commands import specsweep
from sweep.readout.console import console

HOLD_MARGIN = 0.25  # accepted drafts between the measured EMA and a switch threshold


def level_metric(concurrency: int) -> str:
    """What "best at this level" means: single-stream decode speed at 1 (the study's tok_s), the
    aggregate output rate of the steady-state window above."""
    return "decode_tok_s_c1" if concurrency == 1 else f"output_tok_s_c{concurrency}"


@dataclass(frozen=True)
class Measured:
    """One trial's (or the baseline's) per-level result, read from its result.json."""

    name: str
    folder: Path
    role: str
    steps: int | None
    topk: int | None
    adaptive: bool
    levels: dict[int, tuple[float, float]]  # concurrency -> (mean, 95% half-width)
    accept: dict[int, float] = field(default_factory=dict)  # concurrency -> accept length

    @classmethod
    def read(cls, path: Path) -> Measured:
        data = json.loads(path.read_text())
        metrics, params = data.get("metrics") or {}, data.get("params") or {}
        effective = data.get("effective") or {}

        def value(key: str):
            return effective.get(key, params.get(key))

        levels, accept = {}, {}
        for key, mean in metrics.items():
            for prefix in ("decode_tok_s_c", "output_tok_s_c"):
                rest = key[len(prefix) :] if key.startswith(prefix) else ""
                if rest.isdigit() and key == level_metric(int(rest)):
                    ci = metrics.get(key + "_ci95", math.inf)
                    levels[int(rest)] = (float(mean), float(ci))
            if key.startswith("accept_len_c") and key[12:].isdigit():
                accept[int(key[12:])] = float(mean)
        return cls(
            name=data.get("name", path.parent.name),
            folder=path.parent,
            role=data.get("role", "trial"),
            steps=value("speculative_num_steps"),
            topk=value("speculative_eagle_topk"),
            adaptive=bool(params.get("speculative_adaptive")),
            levels=levels,
            accept=accept,
        )


@dataclass(frozen=True)
class Study:
    folder: Path
    baseline: Measured | None
    trials: list[Measured]  # successful static trials

    @classmethod
    def read(cls, folder: Path) -> Study:
        baseline, trials = None, []
        for path in sorted(folder.glob("*/result.json")):
            data = json.loads(path.read_text())
            if data.get("outcome") != "ok":
                continue
            m = Measured.read(path)
            if m.role == "baseline" and "_recheck_" not in m.name:
                baseline = baseline or m
            elif m.role == "trial" and not m.adaptive and m.steps is not None:
                trials.append(m)
        if not trials:
            raise SystemExit(f"{folder}: no successful speculative trial (result.json) to use")
        return cls(folder, baseline, trials)

    def levels(self) -> list[int]:
        return sorted({c for t in self.trials for c in t.levels})

    def best_static(self, concurrency: int) -> Measured:
        return max(
            (t for t in self.trials if concurrency in t.levels),
            key=lambda t: t.levels[concurrency][0],
        )


def _tied(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] + a[1] >= b[0] - b[1] and b[0] + b[1] >= a[0] - a[1]


def measured_config(study: Study, levels: list[int]) -> dict[str, Any]:
    """The adaptive config for `levels` from `study` (module docstring)."""
    config: dict[str, Any] = {}
    notes: dict[str, Any] = {}
    for c in levels:
        chains: dict[int, Measured] = {}
        for t in study.trials:
            if t.topk != 1 or c not in t.levels or t.steps is None:
                continue
            if t.steps not in chains or t.levels[c][0] > chains[t.steps].levels[c][0]:
                chains[t.steps] = t
        if not chains:
            raise SystemExit(
                f"no topk=1 trial was measured at concurrency {c}: SGLang adapts only chains "
                "(topk 1), so there is nothing to choose steps from. Search "
                "speculative_eagle_topk with 1 among the choices, or enqueue a topk=1 trial."
            )
        best_steps, best = max(chains.items(), key=lambda kv: kv[1].levels[c][0])
        best_value = best.levels[c]
        base = study.baseline.levels.get(c) if study.baseline else None
        note: dict[str, Any] = {
            "metric": level_metric(c),
            "best_steps": best_steps,
            "best": _pair(best_value),
            "best_trial": best.name,
            "baseline": _pair(base) if base else None,
            "measured_steps": {str(s): _pair(t.levels[c]) for s, t in sorted(chains.items())},
        }
        if base is not None and best_value[0] <= base[0] - base[1]:
            candidates = [0]
            note["why"] = "no chain beats the baseline's lower bound: speculation off"
        else:
            candidates = sorted(s for s, t in chains.items() if _tied(t.levels[c], best_value))
            note["why"] = "the steps whose interval overlaps the best's"
            if base is not None and _tied(base, best_value):
                candidates = [0, *candidates]
                note["why"] += "; 0 too: the baseline is tied with the best"
        slot = _slot(str(c), candidates, best_steps, best.accept.get(c), note)
        config[str(c)] = slot
        notes[str(c)] = note
    config["specsweep"] = {
        "study": study.folder.name,
        "written_by": "python -m sweep.adaptive",
        "levels": notes,
    }
    adaptive_slots(config)  # as SGLang's loader reads it: ValueError on a malformed file
    return config


def _pair(value: tuple[float, float]) -> list[float]:
    return [round(value[0], 2), round(value[1], 2) if math.isfinite(value[1]) else None]


def _slot(
    key: str, candidates: list[int], best: int, accept_len: float | None, note: dict
) -> dict[str, Any]:
    defaults = {**ADAPTIVE_KNOB_DEFAULTS, **ADAPTIVE_DEFAULT_CONFIG.get(key, {})}
    slot: dict[str, Any] = {"candidate_steps": candidates}
    for knob in ("ema_alpha", "update_interval", "warmup_batches", "ceiling_coeff"):
        slot[knob] = ADAPTIVE_KNOB_DEFAULTS[knob]
    down, up = defaults["down_hysteresis"], defaults["up_hysteresis"]
    if best in candidates and accept_len is not None and best > 0:
        drafts = accept_len - 1  # what the policy's EMA follows: accepted drafts per request
        i = candidates.index(best)
        if i > 0:  # the policy drops below best while EMA <= prev - 0.5 + down
            prev = candidates[i - 1]
            floor = 0.5 if prev == 0 else prev - 0.5
            if drafts - HOLD_MARGIN <= floor + down:
                down = round(drafts - HOLD_MARGIN - floor, 2)
                note["down_hysteresis"] = f"measured {drafts:.2f} accepted drafts at {best} steps"
        rises = i < len(candidates) - 1  # ...and rises above it while EMA > best - 0.5 + up
        if rises and drafts + HOLD_MARGIN > best - 0.5 + up:
            up = round(drafts + HOLD_MARGIN - best + 0.5, 2)
            note["up_hysteresis"] = f"measured {drafts:.2f} accepted drafts at {best} steps"
    slot["down_hysteresis"], slot["up_hysteresis"] = down, up
    return slot


def write_config(study: Study, levels: list[int], python: str | None) -> Path:
    """adaptive_config.json in the study folder, checked by SGLang's loader where it can be."""
    config = measured_config(study, levels)
    path = study.folder / "adaptive_config.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    slots = ", ".join(f"{c}: {config[str(c)]['candidate_steps']}" for c in levels)
    console.print(f"adaptive config: {path}  (candidate steps by batch size: {slots})")
    if python is None:
        console.print(
            "  [yellow]not checked with SGLang's loader[/yellow]: no SGLang environment "
            "(make compat builds .venv-compat; or pass --sglang-python PATH)"
        )
        return path
    view = validate_with_sglang(python, path)  # RuntimeError with SGLang's error if refused
    problems = disagreements(config, view)
    if problems:
        raise SystemExit("SGLang reads the file differently: " + "; ".join(problems))
    console.print(
        f"  SGLang's loader accepts it ({python}): candidate steps {view['candidate_steps']}"
    )
    return path


def after_sweep(study_dir: Path, concurrency: list[int], tracker: Any, parent: str | None) -> None:
    """The end of a multi-level sweep: adaptive_config.json from what it measured, checked with
    SGLang's loader where it can be, attached to the sweep's MLflow run. Never fails the sweep:
    a study that cannot give a file (no topk=1 trial) says why."""
    if len(concurrency) < 2:
        return
    try:
        study = Study.read(study_dir)
        path = write_config(study, sorted(concurrency), compat_python())
    except (SystemExit, RuntimeError, ValueError) as exc:
        console.print(f"adaptive config not written: {exc}")
        return
    if parent is not None:
        tracker.client.log_artifact(parent, str(path))
    again = specsweep("adaptive", "--study", str(study_dir))
    console.print(f"  head-to-head with static: {escape(again)}", soft_wrap=True)
