"""`specsweep reproduce`'s command line, and the same command with an option changed, spelled to
run as printed (sweep.readout.commands): what the exports print for another address, another
load or the attention backend left to SGLang.

`specsweep export` is the same command with --dry-run (it prints the exports without
re-measuring); `specsweep reproduce` re-measures and writes them.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from harness.server.redact import redact_url_passwords
from sweep.readout.commands import specsweep
from sweep.reproduce.deploy_form import FORMS, SGLANG
from sweep.reproduce.export import DEFAULT_PYTHON, DEFAULT_USER

URI_ENV = "SPECSWEEP_MLFLOW_URI"
RUNS = 10  # measured runs by default (more than a trial)
# The options that shape the exports, as (flag, attribute): carried into every printed command.
EXPORT_OPTIONS = (
    ("--form", "form"),
    ("--model-path", "model_path"),
    ("--drafter-path", "drafter_path"),
    ("--host", "host"),
    ("--port", "port"),
    ("--python", "python"),
    ("--user", "user"),
    ("--adaptive-config", "adaptive_config"),
)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sweep.reproduce", description=description)
    p.add_argument(
        "--experiment",
        help="the study (its MLflow experiment); default: the study swept last under --results",
    )
    p.add_argument("--run", help="MLflow run id of the trial (default: the study's answer)")
    p.add_argument("--results", default="results", help="the sweep's tracking.dir")
    p.add_argument(
        "--level",
        type=int,
        help="deploy for this concurrency: the best there (default: by the study's objective)",
    )
    p.add_argument(
        "--tracking-uri",
        default=os.environ.get(URI_ENV),
        help=f"MLflow tracking URI, e.g. a tracking server (default: ${URI_ENV}, "
        "else <results>/mlflow.db)",
    )
    p.add_argument(
        "--adaptive-config", help="SGLang adaptive-speculation JSON to deploy with (recorded)"
    )
    p.add_argument(
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
        p.add_argument(flag, help=f"in the exports, instead of the recorded {what}")
    p.add_argument("--port", type=int, help="in the exports, instead of the recorded server.port")
    p.add_argument(
        "--no-attention-pin",
        action="store_true",
        help="leave --attention-backend to SGLang in the exports (it picks one from the GPU, the "
        "model and topk) instead of pinning the backend the trial ran on",
    )
    p.add_argument(
        "--python",
        help="the absolute path of the Python that has SGLang on the deploying machine, for "
        f"the systemd unit's ExecStart and the script (default: the unit names {DEFAULT_PYTHON}, "
        "a placeholder, where the command is a bare python)",
    )
    p.add_argument(
        "--user",
        default=DEFAULT_USER,
        help=f"the systemd unit's User= (default: {DEFAULT_USER}, a system user to create)",
    )
    p.add_argument("--runs", type=int, default=RUNS, help="measured runs (more than a trial)")
    p.add_argument("--dry-run", action="store_true", help="only print the exports")
    return p


def again(args: argparse.Namespace, command: str, **changes: Any) -> str:
    """`specsweep COMMAND` with this invocation's options, `changes` applied (attribute names;
    None drops an option). COMMAND `export` prints the exports (no --run count, no --dry-run);
    `reproduce` re-measures. The tracking URI is named only where it did not come from the
    environment, which gives it again."""
    values = {**vars(args), **changes}
    argv = ["--experiment", values["experiment"], "--results", str(values["results"])]
    uri = values.get("tracking_uri")
    if uri and uri != os.environ.get(URI_ENV):
        argv += ["--tracking-uri", redact_url_passwords(uri)]
    for flag, name in (("--run", "run"), ("--level", "level")):
        if values.get(name) is not None:
            argv += [flag, str(values[name])]
    defaults = {"form": SGLANG, "user": DEFAULT_USER}  # left out, as a user would
    for flag, name in EXPORT_OPTIONS:
        value = values.get(name)
        if value is not None and value != defaults.get(name):
            argv += [flag, str(value)]
    if values.get("no_attention_pin"):
        argv.append("--no-attention-pin")
    if command == "reproduce" and values.get("runs") != RUNS:
        argv += ["--runs", str(values["runs"])]
    return specsweep(command, *argv)
