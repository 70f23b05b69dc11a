"""The commands the console and the exports print, spelled so they run as printed where the
user is.

One spelling: the `specsweep` entry point (`specsweep sweep ...`, `specsweep reproduce ...`),
never `python sweep.py` or `python -m sweep.X`, which need the virtualenv's interpreter and the
checkout as the working directory. `make sweep` runs the sweep without activating the
virtualenv, so a bare `specsweep` is not on that shell's PATH: the program is then named by its
path in the virtualenv (`.venv/bin/specsweep` from the checkout, an absolute path elsewhere).
The same holds for the other programs the console names (`optuna-dashboard`).

A command line never carries a secret passed on the command line: an override of a secret-named
key (`+hardware.env.HF_TOKEN=...`, harness.server.redact) reads `"$HF_TOKEN"` instead of its
value, as the recorded command.sh does, and a URL's password is masked.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.server.redact import is_secret_name, redact_url_passwords


def program(name: str) -> str:
    """How to call the installed program `name` (a script beside this interpreter) from the
    shell that started this process: its bare name where that shell's PATH finds this very
    script, else its path (relative to the working directory when below it)."""
    installed = Path(sys.executable).parent / name
    if not installed.exists():  # not installed beside this interpreter: PATH's is all there is
        return name
    found = shutil.which(name)
    if found is not None and _same(Path(found), installed):
        return name
    try:
        relative = installed.absolute().relative_to(Path.cwd())
    except ValueError:
        return str(installed.absolute())
    return str(relative) if len(relative.parts) > 1 else f"./{relative}"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def specsweep(*args: str) -> str:
    """`specsweep ARGS`, quoted for a shell."""
    return " ".join([program("specsweep"), *map(shlex.quote, args)])


def override_text(argument: str) -> str:
    key, sep, value = argument.partition("=")
    name = key.lstrip("+~").rsplit(".", 1)[-1]
    if sep and value and is_secret_name(name):
        return f'{shlex.quote(key + "=")}"${name}"'
    return shlex.quote(redact_url_passwords(argument))


def with_overrides(command: str, arguments: Sequence[str], *extra: str) -> str:
    """`specsweep COMMAND <the overrides> <extra>`, quoted for a shell, secrets referenced."""
    return " ".join([program("specsweep"), command, *map(override_text, (*arguments, *extra))])


def rerun_command(arguments: Sequence[str], *extra: str) -> str:
    """`specsweep sweep <the overrides> <extra>`: the study run again."""
    return with_overrides("sweep", arguments, *extra)
