"""`python -m sweep.reproduce --experiment NAME [--run ID] [--runs N] [--dry-run]`

Recompose a tracked trial's recorded config (default: the study's best), relaunch its server,
benchmark it with more runs, say whether the result is consistent with the recorded one, log the
reproduction as an MLflow run nested under the original, and export `launch_server.sh` and a
systemd unit with the exact command (secrets redacted). `--dry-run` only prints the exports.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness import labels
from harness.command import build_server_command
from harness.errors import SpecsweepError
from harness.layout import ResultsLayout, stamp
from harness.results import Outcome
from harness.stats import consistent
from harness.trial import run_trial
from sweep import provenance
from sweep.config import build_trial_spec
from sweep.console import ConsoleReporter, console
from sweep.export import launch_script, systemd_unit
from sweep.schema import SpecsweepConfig, register
from sweep.tracking import Tracker


def pick_run(client: MlflowClient, experiment: str, run_id: str | None) -> Run:
    if run_id:
        return client.get_run(run_id)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no MLflow experiment {experiment!r}: run python sweep.py -m first")
    runs = client.search_runs(
        [found.experiment_id],
        filter_string="tags.`specsweep.role` = 'trial' and tags.`specsweep.outcome` = 'ok'",
        order_by=["metrics.tok_s DESC"],
        max_results=1,
    )
    if not runs:
        raise SystemExit(f"experiment {experiment!r} has no successful trial to reproduce")
    return runs[0]


def recorded_config(client: MlflowClient, run: Run):
    folder = Path(run.data.tags.get("specsweep.folder", ""))
    path = folder / "config.yaml"
    if not path.is_file():  # the trial folder moved: use the copy MLflow keeps
        path = Path(client.download_artifacts(run.info.run_id, "config.yaml", tempfile.mkdtemp()))
    return OmegaConf.merge(OmegaConf.structured(SpecsweepConfig), OmegaConf.load(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweep.reproduce", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--experiment", required=True, help="MLflow experiment (the study name)")
    parser.add_argument("--run", help="MLflow run id of the trial (default: the best)")
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument("--runs", type=int, default=10, help="measured runs (more than a trial)")
    parser.add_argument("--dry-run", action="store_true", help="only print the exports")
    args = parser.parse_args(argv)
    register()
    layout = ResultsLayout.at(args.results)
    results = layout.root
    client = MlflowClient(tracking_uri=layout.mlflow_uri)
    run = pick_run(client, args.experiment, args.run)
    name = run.data.tags.get("mlflow.runName", run.info.run_id)
    cfg = recorded_config(client, run)
    at = stamp()
    cfg.trial.name, cfg.trial.role, cfg.trial.number = f"reproduce_{name}_{at}", "trial", None
    cfg.trial.prune_below = None
    cfg.benchmark.runs = args.runs
    cfg.tracking.dir = str(results)
    try:
        spec = build_trial_spec(cfg)
    except SpecsweepError as exc:
        console.print(f"[red]error:[/red] the recorded config no longer validates: {exc}")
        return 2
    command = build_server_command(spec.server, spec.engine)
    p = run.data.params
    config_text = labels.config_text(
        {key: p.get("effective." + key, p.get(key)) for key in labels.CONFIG_KEYS}
    )
    measured = run.data.metrics.get("tok_s", float("nan"))
    recorded_ci = run.data.metrics.get("tok_s_ci95", float("nan"))
    engine_note = " SIMULATED" if spec.engine.simulated else ""
    description = (
        f"{cfg.model.name} on {cfg.hardware.name}, {args.experiment}/{name} ({config_text}): "
        f"{measured:.1f} ± {recorded_ci:.1f} tok/s{engine_note}"
    )
    out = layout.reproduction(name, at)
    unit_name = f"specsweep-{args.experiment}.service"
    script = launch_script(command, description)
    unit = systemd_unit(command, description, f"/etc/specsweep/{args.experiment}.env")
    if args.dry_run:
        sys.stdout.write(f"# launch_server.sh\n{script}\n# {unit_name}\n{unit}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch_server.sh").write_text(script)
    (out / "launch_server.sh").chmod(0o755)
    (out / unit_name).write_text(unit)
    console.print(
        f"reproducing {name} ({config_text}) with {args.runs} runs; recorded "
        f"{measured:.1f} ± {recorded_ci:.1f} tok/s"
    )
    provenance.write(cfg, command, out / "trial")
    result = run_trial(spec, out / "trial", ConsoleReporter(spec.engine.simulated))
    result.role = "reproduce"
    tracker = Tracker(client.tracking_uri, args.experiment, layout.artifacts)
    run_id = tracker.log_trial(
        result, parent_run_id=run.info.run_id, study=args.experiment, baseline_tok_s=None
    )
    tracker.client.set_tag(run_id, "specsweep.reproduces", run.info.run_id)
    status = 1
    if result.outcome is Outcome.OK:
        new, ci = result.metrics["tok_s"], result.metrics.get("tok_s_ci95", 0.0)
        within = reproduces(measured, recorded_ci, new, ci)
        tracker.client.log_metric(run_id, "reproduced_within_interval", float(within))
        verdict = (
            "consistent with the recorded result"
            if within
            else "[yellow]NOT consistent with the recorded result[/yellow]"
        )
        console.print(
            f"reproduced: {new:.1f} ± {ci:.1f} tok/s vs recorded {measured:.1f} ± "
            f"{recorded_ci:.1f}: difference {new - measured:+.1f}, {verdict} (95% interval of "
            f"the difference ± {math.hypot(recorded_ci, ci):.1f})"
        )
        status = 0
    else:
        console.print(f"[red]reproduction failed: {result.outcome}: {result.error}[/red]")
    console.print(f"launch script: {out / 'launch_server.sh'}", soft_wrap=True)
    console.print(f"systemd unit:  {out / unit_name}", soft_wrap=True)
    console.print(f"trial folder:  {out / 'trial'}; MLflow run {run_id}", soft_wrap=True)
    return status


def reproduces(recorded: float, recorded_ci95: float, new: float, new_ci95: float) -> bool:
    """Is the new mean consistent with the recorded one? By the interval of their difference
    (harness.stats.consistent, the rule the baseline's drift check uses too)."""
    return consistent(recorded, recorded_ci95, new, new_ci95)


if __name__ == "__main__":
    sys.exit(main())
