"""The commands a sweep prints run as printed where the user is, and never carry a secret
passed on the command line: a secret-named key's value is read from the environment, a URL's
password masked."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from sweep.readout.commands import program, rerun_command, specsweep

VENV_SPECSWEEP = Path(sys.executable).parent / "specsweep"


def test_secret_values_are_read_from_the_environment_and_url_passwords_masked():
    line = rerun_command(
        (
            "tracking.dir=/tmp/r",
            "+hardware.env.HF_TOKEN=hf_PLANTED",
            "tracking.optuna_storage=postgresql://u:dbPLANTED@h/db",
        ),
        "search.resolve.max_rounds=2",
    )
    assert "PLANTED" not in line
    assert shlex.split(line)[3] == "+hardware.env.HF_TOKEN=$HF_TOKEN"  # the shell expands it
    assert '"$HF_TOKEN"' in line and "postgresql://u:<redacted>@h/db" in line
    assert shlex.split(line)[1:3] == ["sweep", "tracking.dir=/tmp/r"]
    assert line.endswith("search.resolve.max_rounds=2")


def test_plain_overrides_are_quoted_for_a_shell():
    line = rerun_command(("benchmark.concurrency=[1,64]", "model.name=a b"))
    assert shlex.split(line)[2:] == ["benchmark.concurrency=[1,64]", "model.name=a b"]


def test_the_bare_name_only_where_the_shells_path_finds_this_virtualenvs_program(
    monkeypatch, tmp_path
):
    assert VENV_SPECSWEEP.exists()  # pip install -e . put it beside the interpreter
    monkeypatch.setenv("PATH", f"{VENV_SPECSWEEP.parent}{os.pathsep}/usr/bin")
    assert program("specsweep") == "specsweep"
    # `make sweep` from a shell without the virtualenv: its path, from the working directory
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert program("specsweep") == str(VENV_SPECSWEEP.absolute())
    monkeypatch.chdir(VENV_SPECSWEEP.parent.parent.parent)  # the checkout, above .venv
    spelled = program("specsweep")
    assert not Path(spelled).is_absolute() and Path(spelled).resolve() == VENV_SPECSWEEP.resolve()
    assert specsweep("report", "--experiment", "a b").startswith(f"{spelled} report ")
