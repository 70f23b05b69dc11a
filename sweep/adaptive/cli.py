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
from pathlib import Path

from harness.errors import SpecsweepError
from harness.record.layout import stamp
from sweep.adaptive.config_file import Study, write_config
from sweep.adaptive.head_to_head import configure, measure, plan, show, table, write
from sweep.adaptive.sglang_check import compat_python
from sweep.adaptive.tracking import track
from sweep.config.schema import register
from sweep.readout.console import console


def main(argv: list[str] | None = None) -> int:
    # --help describes the command with this module docstring's second paragraph.
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
