"""The Hydra task: one job = one trial (a sweep's trial, its baseline, or a single run)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from rich.markup import escape

from harness.errors import ConfigError
from harness.record.layout import ResultsLayout
from harness.record.results import Outcome, TrialResult
from harness.server.command import build_server_command
from harness.trial import run_trial
from harness.workload import record as workload_record
from sweep.config.drafter_check import check_drafter
from sweep.config.fraction import baseline_mem_fraction
from sweep.config.override_keys import (
    command_line_overrides,
    composed_keys,
    config_groups,
    extra_config_dirs,
    unknown_key_message,
    unknown_keys,
)
from sweep.config.schema import register
from sweep.config.specs import build_trial_spec
from sweep.config.study_name import (
    NAME_KEY,
    derived_name,
    explicit_name,
    pinned_values,
    unsearch,
)
from sweep.launch import single
from sweep.paths import CONF
from sweep.readout.console import console
from sweep.readout.trial_lines import ConsoleReporter
from sweep.tracking import provenance

log = logging.getLogger(__name__)
CONF_DIR = str(CONF)

register()


def run_job(
    cfg: DictConfig, folder: Path | None = None, reporter: ConsoleReporter | None = None
) -> TrialResult:
    """One trial in `folder` (the Hydra job's output dir unless a GPU slot's thread says)."""
    folder = folder or Path(HydraConfig.get().runtime.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(provenance.config_yaml(cfg))
    reporter = reporter or ConsoleReporter(simulated=cfg.engine.name == "sim")
    try:
        spec = build_trial_spec(cfg)
        check_drafter(cfg, spec)
    except ConfigError as exc:
        result = TrialResult(
            name=cfg.trial.name,
            role=cfg.trial.role,
            outcome=Outcome.INVALID,
            engine=cfg.engine.name,
            simulated=cfg.engine.name == "sim",
            clock_scale=1.0,
            params={},
            folder=str(folder),
            error=str(exc),
        )
        result.write(folder)
        return result
    provenance.write(cfg, build_server_command(spec.server, spec.engine), folder)
    b = spec.benchmark
    sampling = {"temperature": b.temperature, "top_p": b.top_p, "top_k": b.top_k}
    workload_record.write(
        folder, b.workload, b.prompts, b.categories, {**sampling, "source": b.sampling_source}
    )
    result = run_trial(spec, folder, reporter)
    provenance.add_startup(folder, result.startup_phases, result.startup_marks)
    return result


def _single(cfg: DictConfig) -> TrialResult:
    """`python sweep.py` without -m (`specsweep trial`): one trial with the config as composed,
    in a folder of its own, compared with its study's baseline for the same setup
    (sweep.launch.single), tracked standalone."""
    from sweep.tracking.runs import Tracker, resolve_sqlite_uri

    overrides = list(HydraConfig.get().overrides.task)
    found = single.study_baseline(cfg, overrides, provenance.software(cfg))
    if found.refusal is not None:  # its study measured another setup: nothing runs
        console.print(f"[red]error:[/red] {escape(found.refusal)}", soft_wrap=True)
        raise SystemExit(2)
    fraction = baseline_mem_fraction(cfg.search, cfg.server)
    if fraction is not None:  # never SGLang's own default (sweep.config.fraction says why)
        cfg.server.mem_fraction_static = fraction
        console.print(
            f"server.mem_fraction_static unset: this run uses {fraction} "
            "(search.reference, else the searched range's; set it to choose)"
        )
    result = run_job(cfg)
    base = found.baseline if found.baseline and found.baseline.outcome is Outcome.OK else None
    tracker = Tracker(
        resolve_sqlite_uri(cfg.tracking.mlflow_uri),
        cfg.tracking.experiment,
        ResultsLayout.at(cfg.tracking.dir).artifacts,
    )
    base_tok_s = base.metrics.get("tok_s") if base is not None else None
    tracker.log_trial(
        result, parent_run_id=None, study=cfg.search.study_name, baseline_tok_s=base_tok_s
    )
    ConsoleReporter(cfg.engine.name == "sim").trial_done(result, base)
    console.print(single.comparison_line(result, found), soft_wrap=True)
    console.print(f"trial folder: {result.folder}", soft_wrap=True)
    return result


def refuse_unknown_keys(argv: list[str]) -> None:
    """Exit 2 naming each key the command line sets (with or without +/++) that the config does
    not have, and its nearest valid names, before anything is launched: Hydra's own hint
    (`+key=...`) would run the whole sweep with the typo ignored (sweep.config.override_keys)."""
    groups = config_groups(CONF).union(*map(config_groups, extra_config_dirs(argv)))
    composed = None if _own_config_flags(argv) else _composed_keys
    unknown = unknown_keys(command_line_overrides(argv), groups, composed)
    for key, near in unknown.items():
        message = unknown_key_message(key, near)
        console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    if unknown:
        raise SystemExit(2)


def _own_config_flags(argv: list[str]) -> bool:
    """Another primary config or search path: only Hydra composes that one."""
    flags = ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")
    return any(t in flags or t.startswith(tuple(f + "=" for f in flags)) for t in argv)


def _composed_keys(choices: list[str]) -> list[str] | None:
    """The dotted keys of the config these group choices compose (a tenth of a second); None
    when they do not compose, which Hydra then says in its own words."""
    cfg = _composed(choices)
    return None if cfg is None else composed_keys(cfg)


def study_arguments(argv: list[str], multirun: bool | None = None) -> list[str]:
    """The command line with its study made explicit (sweep.config.study_name): the name derived
    from the setup unless `search.study_name` is given, and on a sweep the searched knobs it sets
    (`server.mem_fraction_static=0.90`) taken out of the search space, held for every server.
    Another primary config (-cp/-cn) is left to Hydra, and then needs search.study_name."""
    if _own_config_flags(argv):
        return argv
    overrides = command_line_overrides(argv)
    if multirun is None:
        multirun = any(t in ("-m", "--multirun") for t in argv)
    cfg = _composed(overrides)
    if cfg is None:  # Hydra says why in its own words
        return argv
    extra = []
    if multirun:
        pinned = pinned_values(cfg, overrides)
        extra += [o for o in unsearch(cfg, pinned) if o not in overrides]
    else:
        extra += single.own_folder(overrides)
    if explicit_name(overrides) is None:
        software = provenance.software(cfg)
        extra.append(f"{NAME_KEY}={derived_name(cfg, overrides, software, multirun=multirun)}")
    # Beside the overrides given: Hydra's parser takes its overrides as one run of positionals,
    # so one after a flag's value (`--cfg hydra -p hydra.launcher`) would be refused.
    at = max((i + 1 for i, token in enumerate(argv) if token in overrides), default=len(argv))
    return [*argv[:at], *extra, *argv[at:]]


def _composed(overrides: list[str]) -> DictConfig | None:
    """The config these overrides compose from conf/; None where they do not compose."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException):
        return None


def main() -> None:
    """`python sweep.py [-m] [overrides]` (and `specsweep sweep|trial`): Hydra reads sys.argv."""
    refuse_unknown_keys(sys.argv[1:])
    sys.argv = [sys.argv[0], *study_arguments(sys.argv[1:])]
    _hydra_main()


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _hydra_main(cfg: DictConfig) -> TrialResult:
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        if cfg.trial.role == "worker":  # worker.count > 1: this job is a whole sweep worker
            from sweep.launch.workers import run_worker

            return run_worker(cfg)  # type: ignore[return-value]
        return run_job(cfg)
    return _single(cfg)
