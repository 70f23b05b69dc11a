"""`specsweep COMMAND [ARGS]`: one entry point, as `mlflow ui` or `optuna-dashboard` have one.

Each subcommand hands its arguments, untouched, to the `main` its `python -m` form runs, so the
two spellings never drift apart and `specsweep COMMAND --help` is that command's own help. The
commands are imported only when chosen: `specsweep --help` starts in a fraction of a second
instead of importing MLflow, Optuna and Hydra.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def _sweep(argv: list[str]) -> int:
    """Hydra reads sys.argv itself: the sweep is `python sweep.py -m ARGS` with this argv."""
    from sweep.launch.app import main as hydra_main

    args = argv[1:] if argv[:1] in (["-m"], ["--multirun"]) else argv
    sys.argv = ["specsweep sweep", "-m", *args]
    hydra_main()
    return 0


def _trial(argv: list[str]) -> int:
    """One trial, no search: `python sweep.py ARGS`."""
    from sweep.launch.app import main as hydra_main

    sys.argv = ["specsweep trial", *argv]
    hydra_main()
    return 0


def _preflight(argv: list[str]) -> int:
    from sweep.preflight import main

    return main(argv)


def _report(argv: list[str]) -> int:
    from analysis.report import main

    main(argv)
    return 0


def _requests(argv: list[str]) -> int:
    from analysis.requests import main

    main(argv)
    return 0


def _reproduce(argv: list[str]) -> int:
    from sweep.reproduce.remeasure import main

    return main(argv)


def _export(argv: list[str]) -> int:
    """The reproduction's exports without re-measuring: `python -m sweep.reproduce --dry-run`."""
    from sweep.reproduce.remeasure import main

    return main([*argv, "--dry-run"] if "--dry-run" not in argv else argv)


def _adaptive(argv: list[str]) -> int:
    from sweep.adaptive.cli import main

    return main(argv)


def _compat(argv: list[str]) -> int:
    from sweep.compat.parser_check import main

    return main(argv)


def _services(argv: list[str]) -> int:
    from sweep.services.stores import main

    return main(argv)


def _sync(argv: list[str]) -> int:
    from sweep.sync.upload import main

    return main(argv)


def _drafter(argv: list[str]) -> int:
    from drafter.__main__ import main

    return main(argv)


def _ui(argv: list[str]) -> int:
    """`make ui` without make: MLflow's UI on a results folder's store, one worker, no job runner
    (it starts in seconds with ~0.5 GB instead of `mlflow ui`'s ~15 processes)."""
    import argparse

    parser = argparse.ArgumentParser(prog="specsweep ui", description=_ui.__doc__)
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    store = Path(args.results).resolve() / "mlflow.db"
    if not store.exists():
        print(f"error: no MLflow store at {store}: run a sweep first, or pass --results DIR")
        return 2
    mlflow = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    argv = [mlflow, "server", "--backend-store-uri", f"sqlite:///{store}"]
    argv += ["--host", "127.0.0.1", "--port", str(args.port), "--workers", "1"]
    os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    print(f"MLflow UI on http://127.0.0.1:{args.port} ({store})", flush=True)
    os.execv(mlflow, argv)
    return 0  # not reached: execv replaces this process


@dataclass(frozen=True)
class Command:
    run: Callable[[list[str]], int]
    same_as: str  # the python -m form (or script) it runs
    what: str


COMMANDS = {
    "sweep": Command(_sweep, "python sweep.py -m", "the Optuna sweep (Hydra overrides follow)"),
    "trial": Command(_trial, "python sweep.py", "one configuration, no search"),
    "preflight": Command(_preflight, "python -m sweep.preflight", "check the box at second 0"),
    "report": Command(_report, "python -m analysis.report", "a study's figures and HTML report"),
    "requests": Command(
        _requests, "python -m analysis.requests", "every request of a study, as one table"
    ),
    "reproduce": Command(
        _reproduce, "python -m sweep.reproduce", "re-measure the answer, export its launch"
    ),
    "export": Command(
        _export, "python -m sweep.reproduce --dry-run", "print the answer's launch, no re-measure"
    ),
    "adaptive": Command(
        _adaptive, "python -m sweep.adaptive", "SGLang's adaptive speculation head to head"
    ),
    "compat": Command(
        _compat, "python -m sweep.compat", "every launch through SGLang's own parser"
    ),
    "services": Command(
        _services, "python -m sweep.services", "PostgreSQL + MLflow (and SLURM) for workers"
    ),
    "sync": Command(_sync, "python -m sweep.sync", "upload the trial folders MLflow lacks"),
    "drafter": Command(_drafter, "python -m drafter", "check a drafter checkpoint"),
    "ui": Command(_ui, "make ui", "MLflow's UI on a results folder"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: specsweep COMMAND [ARGS]   (specsweep COMMAND --help: its own options)", ""]
    lines += [f"  {name:<{width}}  {c.what}  [{c.same_as}]" for name, c in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        from difflib import get_close_matches

        near = get_close_matches(name, COMMANDS, n=1)
        hint = f" (did you mean `specsweep {near[0]}`?)" if near else ""
        print(f"specsweep: unknown command {name!r}{hint}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[name].run(rest) or 0
    except SystemExit as exc:  # argparse's --help and errors, Hydra's exit
        if isinstance(exc.code, str):  # SystemExit("why"): Python prints it; so must we
            print(exc.code, file=sys.stderr)
            return 1
        return exc.code if isinstance(exc.code, int) else 0
