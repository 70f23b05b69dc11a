"""`python -m sweep.adaptive --study DIR [--levels C ...] [--runs N] [--write-config]`

From a study's per-level measurements, write `adaptive_config.json` for SGLang's
`--speculative-adaptive-config` (sweep.adaptive.config_file) and check it with SGLang's own loader;
then the head-to-head at every level, each deployment launched and measured as a trial is
(harness.trial.run_trial, the path `sweep.reproduce` re-measures with):

- static: the best static configuration of each level (its recorded config, relaunched);
- default adaptive: SGLang's --speculative-adaptive with its built-in config;
- measured adaptive: --speculative-adaptive with the written file.

The table gives each level's mean and 95% interval per deployment and which to deploy: adaptive
only where it beats the best static by more than the interval of the difference (else static:
one fewer moving part). Written as head_to_head-<time>.json and .csv in the study folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.errors import SpecsweepError
from harness.record.layout import ResultsLayout, stamp
from harness.record.results import Outcome
from harness.server.command import build_server_command
from harness.trial import run_trial
from sweep.adaptive.config_file import (
    Measured,
    Study,
    disagreements,
    level_metric,
    measured_config,
    validate_with_sglang,
)
from sweep.config.schema import SpecsweepConfig, register
from sweep.config.specs import build_trial_spec
from sweep.paths import ROOT
from sweep.readout.console import ConsoleReporter, console
from sweep.tracking import provenance
from sweep.tracking.runs import Tracker, resolve_sqlite_uri

KINDS = ("static", "default adaptive", "measured adaptive")


def compat_python() -> str | None:
    """SGLang's environment as `make compat` builds it (.venv-compat in the checkout, or in the
    main checkout of a git worktree)."""
    roots = [ROOT]
    try:
        common = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        roots.append(Path(common).parent)
    except (OSError, subprocess.SubprocessError):
        pass
    for root in roots:
        python = root / ".venv-compat" / "bin" / "python"
        if python.is_file():
            return str(python)
    return None


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
    console.print(f"  head-to-head with static: python -m sweep.adaptive --study {study_dir}")


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


def track(
    rows: list[dict], cfg: DictConfig, study: Study, files: list[Path], simulated: bool
) -> None:
    """The head-to-head as an MLflow run under the sweep's parent run (the study's latest
    summary names it): per level and deployment the mean and its 95% interval, what to deploy,
    and the table and config files. A store that does not answer costs the run, never the files
    already written."""
    summaries = sorted(study.folder.glob("summary-*.json"))
    latest = json.loads(summaries[-1].read_text()) if summaries else {}
    parent = latest.get("mlflow_parent_run_id")
    metrics: dict[str, float] = {}
    params: dict[str, Any] = {}
    for row in rows:
        c = row["concurrency"]
        params[f"deploy_c{c}"] = row["deploy"]
        if row.get("static_config"):
            params[f"static_config_c{c}"] = row["static_config"]
        for kind in KINDS:
            if row.get(kind):
                key = f"h2h_{kind.replace(' ', '_')}_c{c}"
                metrics[key], metrics[key + "_ci95"] = row[kind]
        if row.get("adaptive_gain") is not None:
            metrics[f"adaptive_gain_c{c}"] = row["adaptive_gain"]
    tags = {"specsweep.study": study.folder.name, "specsweep.simulated": str(simulated).lower()}
    if parent:
        tags["mlflow.parentRunId"] = parent
    try:
        tracker = Tracker(
            resolve_sqlite_uri(cfg.tracking.mlflow_uri),
            cfg.tracking.experiment,
            ResultsLayout.at(cfg.tracking.dir).artifacts,
        )
        name = f"head-to-head {files[0].stem.removeprefix('head_to_head-')}"
        run_id = tracker.log_result_run(name, "head_to_head", tags, params, metrics, files)
    except Exception as exc:  # the store's failure is reported; the files are written already
        console.print(f"  [yellow]not logged to MLflow[/yellow] ({type(exc).__name__}: {exc})")
        return
    where = f" under the sweep's run {parent}" if parent else ""
    console.print(
        f"MLflow: run {run_id} in experiment {cfg.tracking.experiment!r}{where}", soft_wrap=True
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweep.adaptive", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument(
        "--study", required=True, type=Path, help="the study folder (results/<study>)"
    )
    parser.add_argument(
        "--levels", type=int, nargs="+", help="concurrency levels (default: the measured ones)"
    )
    parser.add_argument(
        "--runs", type=int, help="measured runs per launch (default: the trials' own)"
    )
    parser.add_argument(
        "--sglang-python", help="a Python with SGLang, for its loader (default: .venv-compat)"
    )
    parser.add_argument(
        "--write-config", action="store_true", help="only write and check the config"
    )
    args = parser.parse_args(argv)
    register()
    study = Study.read(args.study.resolve())
    levels = sorted(args.levels or study.levels())
    unmeasured = [c for c in levels if not any(c in t.levels for t in study.trials)]
    if unmeasured:
        raise SystemExit(f"{study.folder}: no trial was measured at concurrency {unmeasured}")
    path = write_config(study, levels, args.sglang_python or compat_python())
    if args.write_config:
        return 0
    launches = plan(study, levels, path)
    out = study.folder / f"head_to_head-{stamp()}"
    measured, simulated, configs = [], False, []
    for i, launch in enumerate(launches, 1):
        name = f"{launch.kind.replace(' ', '_')}_{launch.source.name}"
        console.print(
            f"[bold][{i}/{len(launches)}] {launch.kind}[/bold] from {launch.source.name} "
            f"at concurrency {launch.levels}"
        )
        try:
            cfg = configure(launch, out / name, args.runs, name)
            configs.append(cfg)
            simulated = simulated or cfg.engine.name == "sim"
            measured.append(measure(launch, cfg, out / name))
        except SpecsweepError as exc:
            console.print(f"  [red]error:[/red] {exc}")
            measured.append({})
    rows = table(study, levels, launches, measured)
    show(rows, simulated)
    json_path, csv_path = write(rows, out, path, simulated)
    console.print(
        f"\nhead-to-head: {json_path} (and {csv_path.name}); trial folders in {out}/",
        soft_wrap=True,
    )
    console.print(f"adaptive config: {path}", soft_wrap=True)
    if configs:
        track(rows, configs[0], study, [json_path, csv_path, path], simulated)
    return 0 if all(measured) else 1
