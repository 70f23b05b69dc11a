"""The command line that runs a study again (the resume line, the resolve phase's suggestion),
with its secrets left to the environment: an override of a secret-named key
(`+hardware.env.HF_TOKEN=...`, harness.server.redact) reads `"$HF_TOKEN"` instead of its value,
as the recorded command.sh does, and a URL's password is masked. The console must not print
what a user passed on the command line to keep out of logs."""

from __future__ import annotations

import shlex

from harness.server.redact import is_secret_name, redact_url_passwords


def override_text(argument: str) -> str:
    key, sep, value = argument.partition("=")
    name = key.lstrip("+~").rsplit(".", 1)[-1]
    if sep and value and is_secret_name(name):
        return f'{shlex.quote(key + "=")}"${name}"'
    return shlex.quote(redact_url_passwords(argument))


def rerun_command(arguments: tuple[str, ...] | list[str], *extra: str) -> str:
    """`python sweep.py -m <the overrides> <extra>`, quoted for a shell, secrets referenced."""
    return " ".join(["python", "sweep.py", "-m", *map(override_text, (*arguments, *extra))])
