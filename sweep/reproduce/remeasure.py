"""`specsweep reproduce --experiment NAME [--run ID] [--level C] [--runs N] [--dry-run]`

Recompose a tracked trial's recorded config (default: the study's answer, its Deploy line; --level
C: the best at concurrency C; --run: that run), relaunch its server, benchmark it with more
runs, say whether the result is consistent with the recorded one, log the reproduction as an
MLflow run nested under the original, and export `launch_server.sh`, a systemd unit (secrets
redacted) and `deployment.json`: the command to deploy, `python -m sglang.launch_server` with the
trial's SGLang flags even from a simulated study (`--form sim`: the simulator's command), with
what the server resolved for the trial pinned (the attention backend unless
`--no-attention-pin`, the request cap, the CUDA-graph batch size), the load it was chosen for
and the commands that check another, and the engine it was measured on. `--model-path`,
`--drafter-path`, `--host`, `--port`, `--python` and `--user` change the exports only.
`--dry-run` (`specsweep export`) only prints the exports.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness.errors import SpecsweepError
from harness.record import labels
from harness.record.layout import ResultsLayout, stamp
from harness.record.results import Outcome
from harness.record.stats import consistent
from harness.server.command import ServerCommand, build_server_command
from harness.spec import TrialSpec
from harness.trial import run_trial
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.launch.memory_default import left_to_sglang
from sweep.paths import CONF
from sweep.readout.console import console
from sweep.readout.trial_lines import ConsoleReporter
from sweep.reproduce import options
from sweep.reproduce.choose import pick_run, recorded_config, study_config
from sweep.reproduce.deploy_form import LOOPBACK, SGLANG, DeployForm, Overrides, deploy_form
from sweep.reproduce.export import (
    DEFAULT_PYTHON,
    Deployment,
    Service,
    health_url,
    launch_script,
    systemd_unit,
    unit_program,
)
from sweep.reproduce.load import ChosenFor, chosen_for, profile_study
from sweep.reproduce.measured import ATTENTION_FLAG, read
from sweep.reproduce.options import again
from sweep.tracking import provenance
from sweep.tracking.runs import Tracker


def start_timeout(spec: TrialSpec, form: str) -> int:
    """How long the unit waits for the server to answer: the trial's own ready timeout, or for
    SGLang's command from a simulated study, conf/engine/sglang.yaml's (a real model load)."""
    if form == SGLANG and spec.engine.simulated:
        return int(OmegaConf.load(CONF / "engine" / "sglang.yaml").ready_timeout_s)
    return int(spec.engine.ready_timeout_s)


def with_python(command: ServerCommand, python: str | None) -> ServerCommand:
    """The command run by `python` (--python) where it is a Python's `-m` module."""
    if python is None or command.argv[1:2] != ("-m",):
        return command
    return replace(command, argv=(python, *command.argv[1:]))


def load_checks(args: argparse.Namespace, chosen: ChosenFor, study: Any) -> list[tuple[str, str]]:
    """The commands that check another load than the one it was chosen for: each level the
    study measured besides, else a load-profile study of the same setup (`study`: a trial's
    recorded config, sweep.reproduce.choose.study_config)."""
    if not chosen.others:
        return [profile_study(study, args.experiment, args.results)]
    return [
        (
            f"Check {level} requests in flight: re-measures the study's answer there (or the "
            "baseline, where speculation does not pay there) and exports it",
            again(args, "reproduce", level=level, run=None),
        )
        for level in chosen.others
    ]


def export_variants(args: argparse.Namespace, deployed: DeployForm) -> list[tuple[str, str]]:
    """The same exports for another listening address, or without the attention pin."""
    found = []
    host, port = deployed.command.host, deployed.command.port
    if host in LOOPBACK:
        purpose, other = "Serve the network: prints both files for --host 0.0.0.0", "0.0.0.0"
        found.append((purpose, again(args, "export", host=other, port=port)))
    elif host in ("0.0.0.0", "::", ""):
        purpose, other = (
            "Serve this machine only: prints both files for --host 127.0.0.1",
            LOOPBACK[0],
        )
        found.append((purpose, again(args, "export", host=other, port=port)))
    if ATTENTION_FLAG in deployed.pinned:
        purpose = "Deploy on another GPU: prints both files with --attention-backend left to SGLang"
        found.append((purpose, again(args, "export", no_attention_pin=True)))
    return found


def main(argv: list[str] | None = None) -> int:
    args = options.parser(__doc__.split("\n\n")[1]).parse_args(argv)
    register()
    layout = ResultsLayout.at(args.results)
    results = layout.root
    if args.experiment is None:  # the study the user just swept, said so
        args.experiment = layout.latest_study()
        if args.experiment is None:
            raise SystemExit(f"no study under {results}: run a sweep first, or pass --results DIR")
        print(
            f"study {args.experiment} (swept last under {results}; --experiment NAME for another)"
        )
    client = MlflowClient(tracking_uri=args.tracking_uri or layout.mlflow_uri)
    run, why = pick_run(client, args.experiment, args.run, args.level)
    name = run.data.tags.get("mlflow.runName", run.info.run_id)
    cfg = recorded_config(client, run)
    chosen = chosen_for(cfg, args.level, args.run is not None)
    at = stamp()
    cfg.trial.name, cfg.trial.role, cfg.trial.number = f"reproduce_{name}_{at}", "trial", None
    cfg.trial.prune_below = None
    cfg.benchmark.runs = args.runs
    cfg.tracking.dir = str(results)
    try:
        spec = build_trial_spec(cfg)
        service = Service(args.python, args.user, start_timeout(spec, args.form))
    except (SpecsweepError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        return 2
    folder = run.data.tags.get("specsweep.folder")
    measured = read(
        Path(folder) if folder else None,
        run.data.params,
        run.data.tags,
        spec.engine.sglang_version,
    )
    command = build_server_command(spec.server, spec.engine)
    try:
        deployed = deploy_form(
            spec,
            args.form,
            Overrides(args.model_path, args.drafter_path, args.host, args.port),
            measured,
            attention=not args.no_attention_pin,
        )
    except SpecsweepError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    if told := left_to_sglang(spec, cfg.hardware.get("sim_profile"), cfg.model.get("sim_profile")):
        pinned = "--mem-fraction-static" in deployed.command.argv
        console.print(  # a run recorded without one: its launch and export would be SGLang's
            f"[yellow]warning:[/yellow] {told.warning()}; "
            + (
                "the exported launch pins the fraction the trial ran at"
                if pinned
                else "the exported launch leaves it unset too (add --mem-fraction-static to "
                "launch_server.sh)"
            )
        )
    for warning in deployed.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", soft_wrap=True)
    exported = with_python(deployed.command, args.python)
    config_text = labels.config_text(recorded_values(run.data.params))
    measured_tok = run.data.metrics.get("tok_s", float("nan"))
    recorded_ci = run.data.metrics.get("tok_s_ci95", float("nan"))
    engine_note = " SIMULATED" if spec.engine.simulated else ""
    description = (
        f"{cfg.model.name} on {cfg.hardware.name}, {args.experiment}/{name} ({config_text}): "
        f"{measured_tok:.1f} ± {recorded_ci:.1f} tok/s{engine_note}"
    )
    out = layout.reproduction(name, at)
    unit_name = f"specsweep-{args.experiment}.service"
    notes = [chosen.note(), *deployed.comments()]
    study = study_config(client, args.experiment, run, cfg)
    checks = load_checks(args, chosen, study)
    commands = [*checks, *export_variants(args, deployed)]
    program, placeholder = unit_program(exported, service)
    if placeholder:
        console.print(
            f"[yellow]warning:[/yellow] the systemd unit's ExecStart names {DEFAULT_PYTHON}, a "
            "placeholder: pass --python with the absolute path of the Python that has SGLang",
            soft_wrap=True,
        )
    script = launch_script(exported, description, notes, commands)
    env_file = f"/etc/specsweep/{args.experiment}.env"
    unit = systemd_unit(exported, description, env_file, notes, commands, service)
    deployment = Deployment(
        trial=name,
        run_id=run.info.run_id,
        why=why,
        level=args.level,
        argv=list(exported.argv),
        simulated=spec.engine.simulated,
        form=deployed.form,
        warnings=list(deployed.warnings),
        adaptive_config=args.adaptive_config,
        chosen_for={**chosen.as_dict(), "check_other_load": [c for _, c in checks]},
        measured=measured.as_dict(),
        pinned=deployed.pinned,
        pins=list(deployed.pins),
        service={
            **asdict(service),
            "exec_start_program": program,
            "program_is_placeholder": placeholder,
            "health_url": health_url(exported),
        },
        commands=dict(commands),
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
        f"{measured_tok:.1f} ± {recorded_ci:.1f} tok/s",
        soft_wrap=True,
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
        within = reproduces(measured_tok, recorded_ci, new, ci)
        tracker.client.log_metric(run_id, "reproduced_within_interval", float(within))
        verdict = (
            "consistent with the recorded result"
            if within
            else "[yellow]NOT consistent with the recorded result[/yellow]"
        )
        console.print(
            f"reproduced: {new:.1f} ± {ci:.1f} tok/s vs recorded {measured_tok:.1f} ± "
            f"{recorded_ci:.1f}: difference {new - measured_tok:+.1f}, {verdict} (95% interval "
            f"of the difference ± {math.hypot(recorded_ci, ci):.1f})"
        )
        status = 0
    else:
        console.print(f"[red]reproduction failed: {result.outcome}: {result.error}[/red]")
    form = "python -m sglang.launch_server" if deployed.form == SGLANG else "the simulator's"
    console.print(f"launch script: {out / 'launch_server.sh'} ({form})", soft_wrap=True)
    console.print(f"systemd unit:  {out / unit_name}", soft_wrap=True)
    console.print(f"trial folder:  {out / 'trial'}; MLflow run {run_id}", soft_wrap=True)
    console.print(chosen.note(), soft_wrap=True, markup=False)
    for purpose, line in commands:
        console.print(f"{purpose}:\n  {line}", soft_wrap=True, markup=False, highlight=False)
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
