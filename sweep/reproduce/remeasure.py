"""`python -m sweep.reproduce --experiment NAME [--run ID] [--runs N] [--dry-run]`

Recompose a tracked trial's recorded config (default: the study's best by its own objective and
latency limits; --level C: the best at concurrency C), relaunch its server,
benchmark it with more runs, say whether the result is consistent with the recorded one, log the
reproduction as an MLflow run nested under the original, and export `launch_server.sh` and a
systemd unit (secrets redacted) with the command to deploy: `python -m sglang.launch_server` and
the trial's SGLang flags, even from a simulated study (`--form sim`: the simulator's command),
with the configured model and drafter paths (`--model-path`, `--drafter-path`, `--host` and
`--port` change them in the exports only). `--dry-run` only prints the exports.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness.errors import SpecsweepError
from harness.record import labels
from harness.record.layout import ResultsLayout, stamp
from harness.record.results import Outcome
from harness.record.stats import consistent, paired_ratio
from harness.server.command import build_server_command
from harness.trial import run_trial
from sweep.config.schema import SpecsweepConfig, register
from sweep.config.specs import build_trial_spec
from sweep.launch.memory_default import left_to_sglang
from sweep.readout.console import ConsoleReporter, console
from sweep.reproduce.deploy_form import FORMS, SGLANG, Overrides, deploy_form
from sweep.reproduce.export import Deployment, best_by_objective, launch_script, systemd_unit
from sweep.study import levels
from sweep.study.objective import Objective
from sweep.tracking import provenance
from sweep.tracking.runs import Tracker


def trial_runs(client: MlflowClient, experiment: str, role: str = "trial") -> list[Run]:
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no MLflow experiment {experiment!r}: run python sweep.py -m first")
    return client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`specsweep.role` = '{role}' and tags.`specsweep.outcome` = 'ok'",
        order_by=["attributes.start_time DESC"],
        max_results=5000,
    )


def pick_run(
    client: MlflowClient, experiment: str, run_id: str | None, level: int | None = None
) -> tuple[Run, str]:
    """The run to deploy and why: --run, else the best by the study's own objective (its load
    profile and latency limits: sweep.study.objective, read from the trials' recorded config),
    or with --level the best at that concurrency (the baseline where speculation loses there)."""
    if run_id:
        return client.get_run(run_id), "the run asked for"
    runs = trial_runs(client, experiment)
    if level is None:  # the study's own answer, as its last sweep's Deploy line said it
        answer = study_answer(client, experiment, runs)
        if answer is not None:
            return answer
    if not runs:
        raise SystemExit(f"experiment {experiment!r} has no successful trial to reproduce")
    cfg = recorded_config(client, runs[0])
    objective = Objective.from_config(cfg.search, cfg.benchmark)
    named = [(r.data.tags.get("mlflow.runName", r.info.run_id), r.data.metrics) for r in runs]
    bases = trial_runs(client, experiment, role="baseline")
    base = bases[-1].data.metrics if bases else None  # the first measurement, not the re-check
    choice = best_by_objective(named, objective, level, base)
    if choice is None:
        where = f" at concurrency {level}" if level is not None else ""
        raise SystemExit(f"no trial of {experiment!r} meets the study's limits{where}")
    index, why = choice
    if level is None or not bases:
        return runs[index], why
    # At a level, the per-level table's rule (sweep.study.levels): deploy speculation only if it
    # beats the baseline beyond the paired 95% interval of their runs there.
    metric = levels.level_metric(objective, level)
    pair = [per_run(client, r, f"run.{metric}_c{level}") for r in (runs[index], bases[-1])]
    stat = levels.stat(pair[0])
    pick = levels.Pick(named[index][0], "", "", {}, *stat) if stat else None
    base_stat = levels.stat(pair[1])
    if pick is not None and base_stat is not None:
        ratio = paired_ratio(pair[0], pair[1])
        pick.speedup = pick.value / base_stat[0]
        if math.isfinite(ratio.low) and math.isfinite(ratio.high):
            pick.low, pick.high = ratio.low, ratio.high
    recommend, reason = levels.verdict(pick, base_stat)
    if recommend == levels.OFF:
        return bases[-1], f"{levels.OFF} at concurrency {level}: {reason}"
    return runs[index], f"{why}; {reason}"


def study_answer(client: MlflowClient, experiment: str, runs: list[Run]) -> tuple[Run, str] | None:
    """The run the study's last finished sweep said to deploy (its parent run's
    `specsweep.deploy` tag, sweep.study.deploy): a trial, or the baseline for speculation off.
    None for a study recorded before the tag, or one whose named run is not here."""
    sweeps = [
        r
        for r in trial_runs_any(client, experiment, "sweep")
        if r.data.tags.get("specsweep.deploy")
    ]
    if not sweeps:
        return None
    tags = sweeps[0].data.tags
    answer, line = tags["specsweep.deploy"], tags.get("specsweep.deploy_line", "")
    why = f"the study's answer ({line.splitlines()[0] if line else answer})"
    if answer == "baseline":
        bases = trial_runs(client, experiment, role="baseline")
        return (bases[-1], why) if bases else None  # the first measurement, not the re-check
    named = [r for r in runs if r.data.tags.get("mlflow.runName") == answer]
    return (named[0], why) if named else None


def trial_runs_any(client: MlflowClient, experiment: str, role: str) -> list[Run]:
    """Runs of a role whatever their outcome, newest first (a sweep's parent has none)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    return client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`specsweep.role` = '{role}'",
        order_by=["attributes.start_time DESC"],
        max_results=100,
    )


def per_run(client: MlflowClient, run: Run, key: str) -> dict[int, float]:
    """A trial's value per run number (sweep.tracking.runs logs each run as a step)."""
    return {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}


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
    parser.add_argument(
        "--level",
        type=int,
        help="deploy for this concurrency: the best there (default: by the study's objective)",
    )
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("SPECSWEEP_MLFLOW_URI"),
        help="MLflow tracking URI, e.g. a tracking server (default: $SPECSWEEP_MLFLOW_URI, "
        "else <results>/mlflow.db)",
    )
    parser.add_argument(
        "--adaptive-config", help="SGLang adaptive-speculation JSON to deploy with (recorded)"
    )
    parser.add_argument(
        "--form",
        choices=FORMS,
        default=SGLANG,
        help="the exported command: sglang (python -m sglang.launch_server, the default even "
        "from a simulated study) or sim (the simulator's command, to try the export on a CPU)",
    )
    for flag, what in (
        ("--model-path", "model.path"),
        ("--drafter-path", "drafter.path"),
        ("--host", "server.host"),
    ):
        parser.add_argument(flag, help=f"in the exports, instead of the recorded {what}")
    parser.add_argument(
        "--port", type=int, help="in the exports, instead of the recorded server.port"
    )
    parser.add_argument("--runs", type=int, default=10, help="measured runs (more than a trial)")
    parser.add_argument("--dry-run", action="store_true", help="only print the exports")
    args = parser.parse_args(argv)
    register()
    layout = ResultsLayout.at(args.results)
    results = layout.root
    client = MlflowClient(tracking_uri=args.tracking_uri or layout.mlflow_uri)
    run, why = pick_run(client, args.experiment, args.run, args.level)
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
    if told := left_to_sglang(spec, cfg.hardware.get("sim_profile"), cfg.model.get("sim_profile")):
        console.print(  # a run recorded without one: its launch and export would be SGLang's
            f"[yellow]warning:[/yellow] {told.warning()}; the exported launch leaves it unset "
            "too (add --mem-fraction-static to launch_server.sh)"
        )
    command = build_server_command(spec.server, spec.engine)
    try:
        deployed = deploy_form(
            spec, args.form, Overrides(args.model_path, args.drafter_path, args.host, args.port)
        )
    except SpecsweepError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    for warning in deployed.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", soft_wrap=True)
    config_text = labels.config_text(recorded_values(run.data.params))
    measured = run.data.metrics.get("tok_s", float("nan"))
    recorded_ci = run.data.metrics.get("tok_s_ci95", float("nan"))
    engine_note = " SIMULATED" if spec.engine.simulated else ""
    description = (
        f"{cfg.model.name} on {cfg.hardware.name}, {args.experiment}/{name} ({config_text}): "
        f"{measured:.1f} ± {recorded_ci:.1f} tok/s{engine_note}"
    )
    out = layout.reproduction(name, at)
    unit_name = f"specsweep-{args.experiment}.service"
    notes = deployed.comments()
    script = launch_script(deployed.command, description, notes)
    unit = systemd_unit(
        deployed.command, description, f"/etc/specsweep/{args.experiment}.env", notes
    )
    deployment = Deployment(
        trial=name,
        run_id=run.info.run_id,
        why=why,
        level=args.level,
        argv=list(deployed.command.argv),
        simulated=spec.engine.simulated,
        form=deployed.form,
        warnings=list(deployed.warnings),
        adaptive_config=args.adaptive_config,
    )
    if args.dry_run:
        sys.stdout.write(f"# {name}: {why}\n# launch_server.sh\n{script}\n# {unit_name}\n{unit}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    deployment.write(out / "deployment.json")
    (out / "launch_server.sh").write_text(script)
    (out / "launch_server.sh").chmod(0o755)
    (out / unit_name).write_text(unit)
    console.print(
        f"reproducing {name} ({why}; {config_text}) with {args.runs} runs; recorded "
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
    form = "python -m sglang.launch_server" if deployed.form == SGLANG else "the simulator's"
    console.print(f"launch script: {out / 'launch_server.sh'} ({form})", soft_wrap=True)
    console.print(f"systemd unit:  {out / unit_name}", soft_wrap=True)
    console.print(f"trial folder:  {out / 'trial'}; MLflow run {run_id}", soft_wrap=True)
    return status


def recorded_values(params: dict[str, str]) -> dict[str, str | None]:
    """The configuration's searched values as the trial ran them (its effective.* params, else
    the requested ones). MLflow keeps params as text, so a value the trial did not have (the
    baseline's steps) reads "None": back to None, which labels.config_text names as
    "speculation off" instead of "steps=None topk=None draft=None"."""
    values = {key: params.get("effective." + key, params.get(key)) for key in labels.CONFIG_KEYS}
    return {key: None if value in (None, "None") else value for key, value in values.items()}


def reproduces(recorded: float, recorded_ci95: float, new: float, new_ci95: float) -> bool:
    """Is the new mean consistent with the recorded one? By the interval of their difference
    (harness.record.stats.consistent, the rule the baseline's drift check uses too)."""
    return consistent(recorded, recorded_ci95, new, new_ci95)
