"""The command a sweep prints to run its study again never carries a secret passed on the
command line: a secret-named key's value is read from the environment, a URL's password masked."""

from __future__ import annotations

import shlex

from sweep.readout.rerun import rerun_command


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
    assert shlex.split(line)[4] == "+hardware.env.HF_TOKEN=$HF_TOKEN"  # the shell expands it
    assert '"$HF_TOKEN"' in line and "postgresql://u:<redacted>@h/db" in line
    assert shlex.split(line)[:4] == ["python", "sweep.py", "-m", "tracking.dir=/tmp/r"]
    assert line.endswith("search.resolve.max_rounds=2")


def test_plain_overrides_are_quoted_for_a_shell():
    line = rerun_command(("benchmark.concurrency=[1,64]", "model.name=a b"))
    assert shlex.split(line)[3:] == ["benchmark.concurrency=[1,64]", "model.name=a b"]
