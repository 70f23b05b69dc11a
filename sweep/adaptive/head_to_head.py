"""The head-to-head per level: the best static configuration against SGLang's default adaptive
and the measured file, each launched and measured as a trial is (harness.trial.run_trial).

`plan` picks the launches (one per distinct best static configuration, then the two adaptive
servers), `configure` and `measure` run each from a recorded config, `verdict` says which to
deploy at a level (adaptive only beyond the interval of the difference), and `table`, `show` and
`write` give the table on the console and as head_to_head-<time>.json and .csv.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.record.results import Outcome
from harness.server.command import build_server_command
from harness.trial import run_trial
from sweep.adaptive.config_file import Measured, Study, level_metric
from sweep.config.schema import SpecsweepConfig
from sweep.config.specs import build_trial_spec
from sweep.readout.console import console
from sweep.readout.trial_lines import ConsoleReporter
from sweep.tracking import provenance

KINDS = ("static", "default adaptive", "measured adaptive")


def recorded(folder: Path) -> DictConfig:
    return OmegaConf.merge(
        OmegaConf.structured(SpecsweepConfig), OmegaConf.load(folder / "config.yaml")
    )


@dataclass
class Launch:
    kind: str
    source: Measured  # whose recorded config it starts from
    levels: list[int]
    overrides: dict[str, Any]


def plan(study: Study, levels: list[int], config_path: Path) -> list[Launch]:
    """One launch per distinct best static configuration (measured at the levels it wins), then
    the two adaptive servers, each measured at every level. The adaptive servers start from the
    best chain's recorded config (memory, HiCache, drafter), with steps/topk/draft left to SGLang
    (topk 1, the middle candidate)."""
    launches: dict[str, Launch] = {}
    for c in levels:
        best = study.best_static(c)
        launches.setdefault(best.name, Launch("static", best, [], {})).levels.append(c)
    chains = [t for t in study.trials if t.topk == 1 and levels[0] in t.levels]
    base = max(chains, key=lambda t: t.levels[levels[0]][0])
    unset = {f"server.{k}": None for k in ("speculative_num_steps", "speculative_eagle_topk",
                                           "speculative_num_draft_tokens")}  # fmt: skip
    adaptive = {"server.speculative_adaptive": True, **unset}
    key = "server.speculative_adaptive_config"
    return [
        *launches.values(),
        Launch("default adaptive", base, levels, {**adaptive, key: None}),
        Launch("measured adaptive", base, levels, {**adaptive, key: str(config_path)}),
    ]


def configure(launch: Launch, out: Path, runs: int | None, name: str) -> DictConfig:
    cfg = recorded(launch.source.folder)
    before = list(cfg.benchmark.concurrency)
    per_level = dict(zip(before, cfg.benchmark.requests_per_level, strict=False))
    # The study's first level stays first: the prompt plan (and the objective) are sized by it
    # (a launch at only C=64 would need a workload sized for C=64 runs).
    levels = sorted({before[0], *launch.levels}, key=lambda c: (c != before[0], c))
    cfg.benchmark.concurrency = levels
    cfg.benchmark.requests_per_level = [per_level[c] for c in levels] if per_level else []
    if runs is not None:
        cfg.benchmark.runs = runs
        cfg.benchmark.max_runs = max(cfg.benchmark.max_runs, runs)
    for key, value in launch.overrides.items():
        OmegaConf.update(cfg, key, value, merge=False)
    cfg.trial.name, cfg.trial.role, cfg.trial.number = name, "trial", None
    cfg.trial.prune_below = None
    cfg.tracking.dir = str(out.parent.parent.parent)  # the results root: its servers/ records
    return cfg


def measure(launch: Launch, cfg: DictConfig, folder: Path) -> dict[int, tuple[float, float]]:
    spec = build_trial_spec(cfg)
    command = build_server_command(spec.server, spec.engine)
    provenance.write(cfg, command, folder)
    result = run_trial(spec, folder, ConsoleReporter(spec.engine.simulated))
    if result.outcome is not Outcome.OK:
        console.print(f"  [red]{launch.kind} failed: {result.outcome}: {result.error}[/red]")
        return {}
    out = {}
    for c in launch.levels:
        key = level_metric(c)
        if key in result.metrics:
            out[c] = (result.metrics[key], result.metrics.get(key + "_ci95", math.inf))
    return out


def verdict(
    static: tuple[float, float] | None, adaptive: dict[str, tuple[float, float]]
) -> tuple[str, float | None]:
    """Which to deploy at a level, and the adaptive gain over static (fraction)."""
    if static is None:
        return "unknown (static not measured)", None
    if not adaptive:
        return "static", None
    kind, (mean, ci) = max(adaptive.items(), key=lambda kv: kv[1][0])
    gain = mean / static[0] - 1
    margin = math.hypot(ci, static[1])
    return (kind if mean - static[0] > margin else "static"), gain


def table(
    study: Study, levels: list[int], launches: list[Launch], measured: list[dict]
) -> list[dict]:
    rows = []
    for c in levels:
        row: dict[str, Any] = {"concurrency": c, "metric": level_metric(c)}
        base = study.baseline.levels.get(c) if study.baseline else None
        row["baseline_study"] = list(base) if base else None
        adaptive = {}
        for launch, values in zip(launches, measured, strict=True):
            if c not in launch.levels:
                continue
            value = values.get(c)
            row[launch.kind] = list(value) if value else None
            if launch.kind == "static":
                row["static_config"] = (
                    f"{launch.source.name} ({launch.source.steps}/{launch.source.topk})"
                )
            elif value:
                adaptive[launch.kind] = value
        static = tuple(row["static"]) if row.get("static") else None
        row["deploy"], row["adaptive_gain"] = verdict(static, adaptive)  # type: ignore[arg-type]
        rows.append(row)
    return rows


def _fmt(value) -> str:
    if not value:
        return "failed"
    mean, ci = value
    return f"{mean:.1f} ± {ci:.1f}" if math.isfinite(ci) else f"{mean:.1f} (1 run)"


def show(rows: list[dict], simulated: bool) -> None:
    note = " (SIMULATED)" if simulated else ""
    console.print(
        f"\nhead-to-head{note}: tok/s per level (C=1 decode per stream, C>1 output), mean ± 95%"
    )
    console.print(
        f"{'C':>4}  {'static (best per level)':<34} {'default adaptive':>18} "
        f"{'measured adaptive':>18}  deploy"
    )
    for r in rows:
        static = f"{_fmt(r.get('static'))} {r.get('static_config', '')}"
        gain = (
            f" ({r['adaptive_gain']:+.1%} adaptive)" if r.get("adaptive_gain") is not None else ""
        )
        console.print(
            f"{r['concurrency']:>4}  {static:<34} {_fmt(r.get('default adaptive')):>18} "
            f"{_fmt(r.get('measured adaptive')):>18}  {r['deploy']}{gain}"
        )  # fmt: skip


def write(rows: list[dict], out: Path, config_path: Path, simulated: bool) -> tuple[Path, Path]:
    data = {"simulated": simulated, "adaptive_config": str(config_path), "levels": rows}
    json_path, csv_path = out.with_suffix(".json"), out.with_suffix(".csv")
    json_path.write_text(json.dumps(data, indent=2) + "\n")
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["concurrency", "metric", "kind", "config", "mean", "ci95", "deploy"])
        for r in rows:
            for kind in KINDS:
                value = r.get(kind) or [None, None]
                config = r.get("static_config", "") if kind == "static" else kind
                w.writerow([r["concurrency"], r["metric"], kind, config, *value, r["deploy"]])
    return json_path, csv_path
