"""`python -m sweep.preflight [overrides]`: what would sink an overnight sweep, checked at second 0.

Also run at the start of every `python sweep.py -m` (skip with `preflight=false`). Each check
prints pass, warn or fail with what to do about it; nothing here starts a server, and on the
simulator it all takes a couple of seconds.

__init__     run and main: every check in order (this file)
__main__     `python -m sweep.preflight`
check        one check's verdict, and how the console shows a list of them
launched     the memory knobs as the sweep will launch them: held or searched
(sweep.study.search.memory)
checkpoints  the model and drafter paths, and the drafter's own checks
fraction     whether every launch names its memory fraction, and what SGLang picks if not
machine      the engine, the GPUs, disk and open files
weights      the checkpoint's size per GPU (read from its files, or assumed) in the static share
host_ram     host memory at the HiCache sizes the sweep launches, and the server's processes
load         the host's load against its cores before a simulated sweep (timings distort above)
stores       the server port, the results folder, MLflow and the Optuna study

The memory checks judge the sweep that will run: the memory policy decides first which knobs it
holds and which it searches (`launched`), and host memory and the GPUs are judged at those values.
"""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from harness.server.gpu import gpu_inventory
from sweep.preflight.check import Check, render
from sweep.preflight.checkpoints import check_paths
from sweep.preflight.fraction import check_fraction
from sweep.preflight.host_ram import check_host_ram
from sweep.preflight.launched import launched
from sweep.preflight.load import check_load
from sweep.preflight.machine import check_engine, check_gpus, check_host
from sweep.preflight.stores import check_network, check_tracking
from sweep.preflight.weights import check_weights
from sweep.study.search.space import SearchSpace

__all__ = ["Check", "main", "render", "run"]


def run(cfg: DictConfig) -> list[Check]:
    space = SearchSpace.from_config(cfg.search.space)
    knobs = launched(cfg, space)  # what the memory policy holds and searches
    inventory = gpu_inventory()
    return [
        check_engine(cfg),
        *check_gpus(cfg, knobs.fraction, inventory),
        check_fraction(cfg, space),
        check_weights(cfg, knobs.fraction, inventory),
        check_host_ram(cfg, knobs.hicache),
        *check_host(cfg),
        *check_load(cfg),
        *check_paths(cfg, space),
        check_network(cfg),
        *check_tracking(cfg),
    ]


def main(argv: list[str] | None = None) -> int:
    from hydra import compose, initialize_config_dir
    from rich.markup import escape

    from sweep.launch.app import CONF_DIR, refuse_unknown_keys, study_arguments
    from sweep.readout.console import console

    overrides = sys.argv[1:] if argv is None else argv
    refuse_unknown_keys(overrides)  # a typo named with its nearest keys, not Hydra's traceback
    overrides = study_arguments(overrides, multirun=True)  # the study the sweep would land in
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    checks = run(cfg)
    console.print(escape(f"preflight for study {cfg.search.study_name} (engine={cfg.engine.name})"))
    for line in render(checks):
        console.print(line, soft_wrap=True)
    failed = [c for c in checks if c.status == "fail"]
    console.print("[red]not ready: fix the failures above[/]" if failed else "[green]ready[/]")
    return 1 if failed else 0
